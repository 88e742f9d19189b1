"""`bench data download NAME`: fetch a dataset's public raw sources into the raw root.

A family says what it can fetch with ``remote()`` -> :class:`Download`: files at plain URLs
(mirrors tried in order, each checked against its published MD5 or SHA-256) and files inside
a public Google Drive folder (fetched with ``gdown``, an optional dependency:
``pip install 'debias-bench[download]'``). Archives are unpacked into the target folder (paths
that would leave it are refused) and then removed. A file is written under a ``.part`` name
and renamed only once complete and checked, so an interrupted download leaves nothing that
looks finished; the next attempt resumes the ``.part`` (``debias_bench.data.resumable``).
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
import sys
import tarfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from debias_bench.data.resumable import Pinned, fetch_file
from debias_bench.errors import BenchError, CorruptDataError, DataNotFoundError

Log = Callable[[str], None]


@dataclass(frozen=True)
class RemoteFile:
    """A file at one or more URLs (mirrors), with its published checksum."""

    name: str  # saved as <target>/<name>
    urls: tuple[str, ...]
    md5: str | None = None
    sha256: str | None = None
    unpack: bool = False  # an archive: unpacked into the target folder, then removed


@dataclass(frozen=True)
class DriveFile:
    """The file of a public Google Drive folder whose name starts with ``stem``."""

    folder_url: str
    stem: str
    unpack: bool = True


@dataclass(frozen=True)
class Download:
    """What ``bench data download`` fetches for a dataset, and where it goes."""

    target: str  # folder under the raw root ("." for the raw root itself)
    files: tuple[RemoteFile | DriveFile, ...]
    present: tuple[str, ...] = ()  # paths under the raw root that exist once it is done
    note: str = ""  # shown before downloading (licence, size, what is checked)


def _log(message: str) -> None:
    print(message, file=sys.stderr)


def fetch(download: Download, raw_root: Path, force: bool = False, log: Log = _log) -> Path:
    """Fetch and unpack everything of ``download`` under ``raw_root``; returns the folder."""
    folder = raw_root / download.target
    if download.present and not force and all((raw_root / p).exists() for p in download.present):
        log(f"already present: {', '.join(str(raw_root / p) for p in download.present)}")
        return folder
    if download.note:
        log(download.note)
    folder.mkdir(parents=True, exist_ok=True)
    for item in download.files:
        if isinstance(item, RemoteFile):
            path = folder / item.name
            if force or not (path.is_file() and _matches(path, item)):
                _fetch_url(item, path, log)
        else:
            path = _fetch_drive(item, folder, log)
        if item.unpack:
            unpack(path, folder, log)
            path.unlink()
    missing = [p for p in download.present if not (raw_root / p).exists()]
    if missing:
        raise CorruptDataError(
            f"downloaded, but {', '.join(str(raw_root / p) for p in missing)} did not appear",
            hint="the published archive's layout has changed; unpack it by hand",
        )
    return folder


def _digest(path: Path, algorithm: str) -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as handle:
        while block := handle.read(1 << 22):
            digest.update(block)
    return digest.hexdigest()


def _matches(path: Path, item: RemoteFile) -> bool:
    """Whether ``path`` has ``item``'s published checksum (True when none is published)."""
    if item.sha256:
        return _digest(path, "sha256") == item.sha256
    if item.md5:
        return _digest(path, "md5") == item.md5
    return True


def _fetch_url(item: RemoteFile, target: Path, log: Log) -> None:
    """The file from its mirrors, resumable (``debias_bench.data.resumable``)."""
    pinned = Pinned(sha256=item.sha256, md5=item.md5)
    fetch_file(item.name, item.urls, pinned, target, log)
    if pinned.algorithm is None:
        log(f"{item.name}: no checksum is published; its sha256 is {_digest(target, 'sha256')}")


def _fetch_drive(item: DriveFile, folder: Path, log: Log) -> Path:
    """The file of a public Drive folder, via gdown (only that file when gdown can list)."""
    try:
        import gdown
    except ImportError as exc:
        raise BenchError(
            f"this dataset is published in a Google Drive folder ({item.folder_url}), which "
            "needs the optional dependency gdown",
            hint="pip install 'debias-bench[download]' (or download the folder by hand and "
            "unpack it into the raw root)",
        ) from exc
    staging = folder / ".gdrive"
    staging.mkdir(parents=True, exist_ok=True)
    try:
        chosen = _drive_file(gdown, item, staging, log)
        target = folder / chosen.name
        chosen.replace(target)
        return target
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _drive_file(gdown: ModuleType, item: DriveFile, staging: Path, log: Log) -> Path:
    log(f"listing {item.folder_url} (gdown)")
    if "skip_download" in inspect.signature(gdown.download_folder).parameters:
        listing = gdown.download_folder(
            url=item.folder_url, output=str(staging), quiet=True, skip_download=True
        )
        wanted = [f for f in listing or () if Path(f.path).name.startswith(item.stem)]
        if wanted:
            out = staging / Path(wanted[0].path).name
            log(f"downloading {Path(wanted[0].path).name} (gdown)")
            gdown.download(id=wanted[0].id, output=str(out), quiet=False)
            if out.is_file():
                return out
    else:  # an older gdown: the whole folder
        gdown.download_folder(url=item.folder_url, output=str(staging), quiet=False)
    found = sorted(p for p in staging.rglob(f"{item.stem}*") if p.is_file())
    if not found:
        raise DataNotFoundError(
            f"no file starting with {item.stem!r} came from {item.folder_url}",
            hint="Google Drive may be rate-limiting; retry later or download it by hand",
        )
    return found[0]


def unpack(archive: Path, folder: Path, log: Log = _log) -> None:
    """Unpack a .tar(.gz/.bz2/.xz) or .zip archive into ``folder``; refuses member paths that
    would leave it."""
    log(f"unpacking {archive.name} into {folder}")
    root = folder.resolve()
    try:
        if zipfile.is_zipfile(archive):
            with zipfile.ZipFile(archive) as zf:
                for name in zf.namelist():
                    _inside(root, name, archive)
                zf.extractall(folder)
            return
        with tarfile.open(archive) as tar:
            members = tar.getmembers()
            for member in members:
                _inside(root, member.name, archive)
                if member.issym() or member.islnk():
                    raise CorruptDataError(f"{archive}: links are not accepted ({member.name})")
            if hasattr(tarfile, "data_filter"):  # Python >= 3.12: also the library's checks
                tar.extractall(folder, members=members, filter="data")
            else:
                tar.extractall(folder, members=members)  # paths and links checked above
    except (tarfile.TarError, zipfile.BadZipFile, EOFError) as exc:
        raise CorruptDataError(f"cannot unpack {archive}: {exc}") from exc


def _inside(root: Path, name: str, archive: Path) -> None:
    if not (root / name).resolve().is_relative_to(root):
        raise CorruptDataError(f"{archive}: member {name!r} would be written outside {root}")
