"""Datasets in the MNIST idx format (MNIST and others): find them, download them, read them."""

from __future__ import annotations

import gzip
import hashlib
import shutil
import sys
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from debias_bench.errors import CorruptDataError, DataNotFoundError

MNIST_FILES = {
    "train_images": "train-images-idx3-ubyte",
    "train_labels": "train-labels-idx1-ubyte",
    "test_images": "t10k-images-idx3-ubyte",
    "test_labels": "t10k-labels-idx1-ubyte",
}


@dataclass(frozen=True)
class IdxSource:
    """A dataset in the MNIST idx format: its files, where they are under the raw root, and
    where to fetch them. A colour-biased variant of another idx dataset names its own."""

    name: str  # for messages, e.g. "MNIST"
    folders: tuple[str, ...]  # sub-folders of the raw root looked in ("." = the root itself)
    files: dict[str, str] = field(default_factory=lambda: dict(MNIST_FILES))
    mirrors: tuple[str, ...] = ()  # base URLs serving "<file>.gz"
    gz_md5: dict[str, str] = field(default_factory=dict)  # of the .gz files, by file name
    image_shape: tuple[int, int] = (28, 28)
    counts: dict[str, int] = field(default_factory=dict)  # expected images per split

    @property
    def key(self) -> str:
        """The folder name of its downloads (``<data root>/downloads/<key>``)."""
        return self.folders[0] if self.folders and self.folders[0] != "." else self.name.lower()


MNIST = IdxSource(
    name="MNIST",
    folders=("mnist", "MNIST/raw", "."),
    mirrors=(
        "https://ossci-datasets.s3.amazonaws.com/mnist/",
        "http://yann.lecun.com/exdb/mnist/",
    ),
    # MD5 of the .gz files as served by the mirrors (the values torchvision checks).
    gz_md5={
        "train-images-idx3-ubyte.gz": "f68b3c2dcbeaaa9fbdd348bbdeb94873",
        "train-labels-idx1-ubyte.gz": "d53e105ee54ea40749a09fcbcd1e9432",
        "t10k-images-idx3-ubyte.gz": "9fb629c4189551a2d022fa330f9573f3",
        "t10k-labels-idx1-ubyte.gz": "ec29112dd5afa0611ce80d1b7f02629c",
    },
    counts={"train": 60000, "test": 10000},
)


def candidate_dirs(source: IdxSource, raw_root: Path, download_dir: Path) -> list[Path]:
    """Where the files are looked for: the source's folders under the raw root, then our
    download folder."""
    return [raw_root / folder for folder in source.folders] + [download_dir]


def _find(folder: Path, stem: str) -> Path | None:
    for name in (stem + ".gz", stem):
        if (folder / name).is_file():
            return folder / name
    return None


def find(source: IdxSource, raw_root: Path, download_dir: Path) -> dict[str, Path] | None:
    """Paths of the source's idx files when all are in one of its folders (no download)."""
    for folder in candidate_dirs(source, raw_root, download_dir):
        found = {key: _find(folder, stem) for key, stem in source.files.items()}
        if all(found.values()):
            return found  # type: ignore[return-value]
    return None


def not_found(
    source: IdxSource, raw_root: Path, download_dir: Path, reason: str, name: str
) -> DataNotFoundError:
    """The DataNotFoundError of a missing source: where it looked and how to get it."""
    where = "\n    ".join(str(p) for p in candidate_dirs(source, raw_root, download_dir))
    first = source.folders[0] if source.folders else "."
    return DataNotFoundError(
        f"{source.name} idx files not found; looked in:\n    {where}\n  and {reason}",
        hint=f"point --raw-root (or BENCH_RAW_ROOT) at a folder holding {first}/"
        f"{next(iter(source.files.values()))}.gz etc., e.g. `bench data prepare {name} "
        "--raw-root ../shared/data`"
        + (f", or run `bench data download {name}`" if source.mirrors else ""),
    )


def locate(
    source: IdxSource,
    raw_root: Path,
    download_dir: Path,
    allow_download: bool = True,
    name: str = "cmnist",
) -> dict[str, Path]:
    """Paths of the idx files; downloads into ``download_dir`` when they are nowhere."""
    found = find(source, raw_root, download_dir)
    if found:
        return found
    reason = "download disabled"
    if allow_download and source.mirrors:
        try:
            return download(source, download_dir)
        except OSError as exc:
            reason = f"download failed ({exc})"
    elif allow_download:
        reason = "it has no download mirror"
    raise not_found(source, raw_root, download_dir, reason, name)


def download(source: IdxSource, folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {}
    for key, stem in source.files.items():
        name = stem + ".gz"
        target = folder / name
        if not target.is_file():
            _download_one(source, name, target)
        paths[key] = target
    return paths


def _download_one(source: IdxSource, name: str, target: Path) -> None:
    errors = []
    for mirror in source.mirrors:
        tmp = target.with_suffix(".part")
        try:
            print(f"downloading {mirror}{name}", file=sys.stderr)
            with urllib.request.urlopen(mirror + name, timeout=30) as resp, open(tmp, "wb") as out:
                shutil.copyfileobj(resp, out)
            digest = hashlib.md5(tmp.read_bytes()).hexdigest()
            want = source.gz_md5.get(name)
            if want is not None and digest != want:
                raise OSError(f"checksum mismatch for {name} from {mirror}: md5 {digest}")
            tmp.replace(target)
            return
        except OSError as exc:
            errors.append(f"{mirror}: {exc}")
            tmp.unlink(missing_ok=True)
    raise OSError("; ".join(errors))


def read_idx(path: Path) -> np.ndarray:
    """Parse an idx file (gzipped or not); errors name the file."""
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rb") as handle:
            data = handle.read()
    except (OSError, EOFError) as exc:
        raise CorruptDataError(f"cannot read {path}: {exc}") from exc
    if len(data) < 8 or data[0] != 0 or data[1] != 0 or data[2] != 0x08:
        raise CorruptDataError(f"{path} is not an unsigned-byte idx file (bad magic number)")
    ndim = data[3]
    shape = tuple(int.from_bytes(data[4 + 4 * i : 8 + 4 * i], "big") for i in range(ndim))
    offset = 4 + 4 * ndim
    if len(data) - offset != int(np.prod(shape)):
        raise CorruptDataError(f"{path} is truncated: header says {shape}")
    return np.frombuffer(data, dtype=np.uint8, offset=offset).reshape(shape)


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as a gzipped idx file (fixtures, tests)."""
    header = bytes([0, 0, 0x08, array.ndim]) + b"".join(
        int(n).to_bytes(4, "big") for n in array.shape
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wb") as handle:
        handle.write(header + np.ascontiguousarray(array, dtype=np.uint8).tobytes())


def load_idx(
    source: IdxSource, raw_root: Path, download_dir: Path, name: str = "cmnist"
) -> dict[str, np.ndarray]:
    """The four arrays of ``source``, checked for image shape and matching label counts.

    A split whose size differs from ``source.counts`` (a subset, a fixture) is a warning."""
    paths = locate(source, raw_root, download_dir, name=name)
    arrays = {key: read_idx(path) for key, path in paths.items()}
    for split in ("train", "test"):
        images, labels = arrays[f"{split}_images"], arrays[f"{split}_labels"]
        if images.ndim != 3 or images.shape[1:] != source.image_shape:
            raise CorruptDataError(
                f"{paths[split + '_images']}: expected N x {source.image_shape}, got {images.shape}"
            )
        if len(labels) != len(images):
            raise CorruptDataError(f"{paths[split + '_labels']}: label count does not match images")
        want = source.counts.get(split)
        if want is not None and len(images) != want:
            print(
                f"warning: {paths[split + '_images']} holds {len(images)} images, "
                f"{source.name} has {want} (a subset or a fixture?)",
                file=sys.stderr,
            )
    return arrays


def load_mnist(raw_root: Path, download_dir: Path) -> dict[str, np.ndarray]:
    """The four MNIST arrays."""
    return load_idx(MNIST, raw_root, download_dir)
