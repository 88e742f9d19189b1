"""Prepared data is checked against its manifest before a run reads it.

``manifest.json`` (written by ``family.publish_dataset``) holds the SHA-256 of every file of a
prepared dataset. Before a run reads a split, each file it reads is checked:

* files read into memory (the 28/32-px sets, ~0.1 s for Colored MNIST) are hashed every time;
* memory-mapped files (the 224-px sets, GBs) are hashed once, and then trusted while their
  size and modification time are those recorded in ``.verified.json`` beside the manifest.

A mismatch, a missing file or a missing manifest is a CorruptDataError naming the file and
the command that rebuilds it (a :class:`BadDataError` where a run reads it: the run is
``failed (bad data)``).

Before a sweep starts anything, ``debias_bench.launchers.preflight`` asks :func:`changed_files`
about
the files its runs will read: a file whose size and modification time are those of its stamp
in ``.verified.json`` (written when the build hashed it, and after every full check) costs one
``stat``; any other is hashed then and there. So a prepared file changed after its build (any
write moves its mtime) refuses the sweep with exit 2 and the fix, before a run folder exists;
only a change that also restores the old mtime gets past it, and the hash at load (every time
for the in-memory sets) still stops that run.

The data's fingerprint is a hash of the checksums of the files read, so two runs share a
fingerprint exactly when they read the same bytes.

The manifest is written last into a finished build, so it is also the dataset's completion
marker: ``completeness_problems`` says whether every file it lists is there with its recorded
size (``sizes``; no hashing), which is what "prepared" means. Manifests written before sizes
were recorded (stores prepared by older versions) have no ``sizes`` table: for them a listed
file must be present, and its content is checked by hash when a run reads it, as before. They
keep working; no rebuild is asked for.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from debias_bench.data.spec import splits_problems
from debias_bench.errors import CorruptDataError, FailReason, RunFailure

if TYPE_CHECKING:  # annotations only (torch): a dataset registers without torch
    from debias_bench.data.contract import Splits

MANIFEST = "manifest.json"
VERIFIED_CACHE = ".verified.json"


class BadDataError(RunFailure, CorruptDataError):
    """Data that fails a check when it is read (a changed prepared file, a label outside the
    dataset's classes): a CorruptDataError, and a run that meets it ends ``failed`` with the
    reason ``bad data`` and this message (no traceback)."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        RunFailure.__init__(self, FailReason.BAD_DATA, message, hint)


def sha256(path: Path, chunk: int = 1 << 22) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def read_manifest(root: Path, fix: str) -> dict[str, Any]:
    """The manifest of the prepared dataset at ``root``; CorruptDataError when absent/broken."""
    path = root / MANIFEST
    if not path.is_file():
        raise CorruptDataError(
            f"{path} is missing: the prepared data in {root} cannot be checked",
            hint=f"rebuild it (this restores the manifest): `{fix}`",
        )
    try:
        manifest = json.loads(path.read_text())
        if not isinstance(manifest.get("files"), dict):
            raise ValueError("no 'files' table")
    except (ValueError, OSError, AttributeError) as exc:
        raise CorruptDataError(f"{path} is unreadable ({exc})", hint=f"rebuild: `{fix}`") from exc
    return manifest


def completeness_problems(root: Path) -> list[str]:
    """What is missing from the prepared dataset at ``root`` (empty: complete): no manifest,
    an unreadable one, or a listed file absent or of another size than recorded. Cheap (a
    ``stat`` per file), so it runs every time a dataset is asked whether it is prepared."""
    path = root / MANIFEST
    if not path.is_file():
        return [f"{path} is missing"]
    try:
        manifest = json.loads(path.read_text())
        files, sizes = manifest["files"], manifest.get("sizes", {})
        if not isinstance(files, dict) or not isinstance(sizes, dict):
            raise ValueError("no 'files' table")
    except (ValueError, OSError, KeyError, TypeError) as exc:
        return [f"{path} is unreadable ({exc})"]
    problems = []
    for rel in sorted(files):
        file = root / rel
        try:
            size = file.stat().st_size
        except OSError:
            problems.append(f"{file} is missing")
            continue
        if rel in sizes and size != sizes[rel]:
            problems.append(f"{file} has {size} bytes, the manifest says {sizes[rel]}")
    return problems


def _read_cache(root: Path) -> dict[str, list[Any]]:
    try:
        data = json.loads((root / VERIFIED_CACHE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_cache(root: Path, cache: Mapping[str, list[Any]]) -> None:
    tmp = root / f"{VERIFIED_CACHE}.{os.getpid()}.tmp"
    with contextlib.suppress(OSError):  # a read-only data root: hash again next time
        tmp.write_text(json.dumps(cache, sort_keys=True))
        os.replace(tmp, root / VERIFIED_CACHE)
    with contextlib.suppress(OSError):
        tmp.unlink(missing_ok=True)


def stamp(path: Path, digest: str) -> list[Any]:
    """What ``.verified.json`` records of a file whose content was found to be ``digest``:
    its size and modification time (taken before hashing it) and the digest."""
    stat = path.stat()
    return [stat.st_size, stat.st_mtime_ns, digest]


def record_stamps(root: Path, stamps: Mapping[str, list[Any]]) -> None:
    """Add ``stamps`` (relative path -> :func:`stamp`) to ``root``'s ``.verified.json``."""
    if stamps:
        _write_cache(root, {**_read_cache(root), **stamps})


def _unchanged(path: Path, rel: str, want: str, cache: Mapping[str, list[Any]]) -> list[Any] | None:
    """The file's current stamp when it is the one recorded for ``want`` (None otherwise)."""
    stat = path.stat()
    now = [stat.st_size, stat.st_mtime_ns, want]
    return now if cache.get(rel) == now else None


def check_files(root: Path, files: Iterable[Path], *, trust_stat: bool, fix: str) -> dict[str, str]:
    """Check ``files`` (under ``root``) against the manifest; returns ``{relative path: sha256}``.

    ``trust_stat``: a file whose size and mtime match the record of an earlier full check is
    not hashed again (for memory-mapped sets); without it every file is hashed. Either way a
    file that passes is stamped in ``.verified.json`` (what :func:`changed_files` reads). A
    mismatch or a missing file is a :class:`BadDataError` naming the file and ``fix``."""
    manifest_files: dict[str, str] = read_manifest(root, fix)["files"]
    cache = _read_cache(root)
    digests, fresh = {}, {}
    for path in files:
        rel = path.relative_to(root).as_posix()
        want = manifest_files.get(rel)
        if want is None:
            raise BadDataError(f"{path} is not listed in {root / MANIFEST}", hint=f"`{fix}`")
        if not path.is_file():
            raise BadDataError(f"{path} is missing", hint=f"rebuild it: `{fix}`")
        unchanged = _unchanged(path, rel, want, cache)
        if not (trust_stat and unchanged):
            now = stamp(path, want)
            if sha256(path) != want:
                raise BadDataError(
                    f"{path} does not match its checksum in {root / MANIFEST}: the prepared "
                    "data was changed after it was built",
                    hint=f"rebuild it: `{fix}`",
                )
            if cache.get(rel) != now:
                fresh[rel] = now
        digests[rel] = want
    record_stamps(root, fresh)
    return digests


def changed_files(root: Path, files: Iterable[Path]) -> list[str]:
    """The files of ``files`` (under ``root``, listed in its manifest) whose content is not what
    the manifest says, one line each; empty when all match. A file whose size and mtime are
    those of its stamp is taken as checked (one ``stat``); any other is hashed now and, when it
    matches, stamped, so the next call costs a ``stat`` again. Files that are missing or not
    listed are left to ``completeness_problems`` and to the run's own check."""
    try:
        manifest_files = json.loads((root / MANIFEST).read_text())["files"]
    except (OSError, ValueError, KeyError, TypeError):
        return []  # no manifest, or an unreadable one: completeness_problems says so
    cache = _read_cache(root)
    problems, fresh = [], {}
    for path in files:
        rel = path.relative_to(root).as_posix()
        want = manifest_files.get(rel)
        try:
            if want is None or _unchanged(path, rel, want, cache):
                continue
            now = stamp(path, want)
            if sha256(path) != want:
                problems.append(f"{path} does not match its checksum in {root / MANIFEST}")
            else:
                fresh[rel] = now
        except OSError:
            continue  # missing: completeness_problems names it
    record_stamps(root, fresh)
    return problems


def fingerprint_of(digests: Mapping[str, str]) -> str:
    """A short content hash of a set of files (their relative paths and checksums)."""
    canonical = json.dumps(sorted(digests.items()))
    return hashlib.sha256(canonical.encode()).hexdigest()[:16]


def manifest_digests(root: Path, fix: str) -> dict[str, str]:
    """Every file checksum the manifest of ``root`` lists (no re-hashing)."""
    return dict(read_manifest(root, fix)["files"])


Load = Callable[[Any, float], "Splits"]


def range_checked(load: Load) -> Load:
    """``load`` whose splits are checked against the dataset contract and the family's spec
    (``spec.splits_problems``): an empty split, labels that are not integers or lie outside
    its classes, NaN pixels or a one-class training split is a BadDataError naming the
    dataset, the split and, where it counts, how many and the first one (the run on it ends
    ``failed (bad data)``, before it trains)."""

    @functools.wraps(load)
    def checked(self: Any, ratio: float) -> Splits:
        splits = load(self, ratio)
        problems = splits_problems(splits, self.spec)
        if problems:
            spec = self.spec
            raise BadDataError(
                f"{spec.name} at {float(ratio):g}%: {'; '.join(problems)}; fix its load() or "
                "its spec (a dataset gives non-empty train, valid and test splits of uint8 "
                f"images N x H x W x C, with integer labels in 0..{spec.num_classes - 1} and "
                f"bias labels in 0..{spec.num_biases - 1})"
            )
        return splits

    checked.checks_ranges = True  # type: ignore[attr-defined]
    return checked
