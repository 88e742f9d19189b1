"""Base class of a dataset family and the on-disk store of prepared splits.

Prepared splits use the LfF npy layout, one folder per split::

    <split>/images.npy   uint8  N x H x W x C
    <split>/attrs.npy    int64  N x 2   ([label, bias])

plus a ``manifest.json`` per prepared dataset with its build parameters and the SHA-256 and size
of every file: ``load`` checks the files a run reads against it (``debias_bench.integrity``) and
``verify`` checks everything, counts included.

Prepared data is replaced atomically, in one place (``DatasetFamily.build_into``:
``seal_dataset`` then ``replace_dir``): build into ``<name>.building`` beside the live folder,
write the manifest last (it is the completion marker), check the new folder, rename the live
folder aside to ``<name>.old-<pid>``, rename the new one into place, delete the old one. A kill
at any point leaves either a complete folder under the live name or the live name missing beside
a complete sibling; ``settle`` (run by ``prepare`` and before a run reads, under the build lock)
puts that sibling back and removes leftovers, saying so in one line. "Prepared" means every file
the manifest lists is there with its recorded size (``integrity.completeness_problems``): a
``bench data prepare`` rebuilds a dataset that misses a file, and a run refuses it with an error
naming the file and the command that repairs it (a run never rebuilds data that was damaged).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import json
import os
import shutil
import sys
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from debias_bench.data import DatasetSpec, Split, Splits
from debias_bench.data_options import DataOption, check_options, declared_options
from debias_bench.download import Download
from debias_bench.errors import BenchError, ConfigError, CorruptDataError, DataNotFoundError
from debias_bench.integrity import (
    MANIFEST,
    VERIFIED_CACHE,
    check_files,
    completeness_problems,
    fingerprint_of,
    manifest_digests,
    sha256,
)


class DatasetFamily(ABC):
    """A registered dataset: builds itself from raw sources, loads its splits, verifies them.

    Build/read options are declared as ``DataOption`` class attributes (one place: type,
    default, allowed values, doc); the constructor checks the options it is given against them
    and ``self.<option>`` reads a value. A family that stores its splits in the npy layout
    implements ``prepare`` and ``split_dirs``; ``load`` then checks every file a run reads
    against the manifest before reading it."""

    spec: ClassVar[DatasetSpec]
    #: bump when the build recipe changes, so old prepared data is not silently reused
    build_version: ClassVar[str] = "1"
    #: splits stay on disk as memory maps (the 224-px sets) instead of in memory
    memory_mapped: ClassVar[bool] = False

    @property
    def auto_download(self) -> bool:
        """Whether ``prepare`` fetches missing raw sources itself (Colored MNIST's mirrors)."""
        return False

    data_seed = DataOption(
        int, 0, "seed of the build's random draws (splits, bias assignment)", minimum=0
    )

    def __init__(self, raw_root: Path, data_root: Path, **options: Any) -> None:
        self.raw_root = Path(raw_root)
        self.data_root = Path(data_root)
        name = self.registered_name()
        declared = declared_options(type(self))
        given = check_options(type(self), options, name)
        self._option_values = {key: opt.default for key, opt in declared.items()} | given
        self._verified: dict[tuple[str, ...], dict[str, str]] = {}
        if name != self.spec.name:  # a subclass registered under its own name
            self.spec = dataclasses.replace(self.spec, name=name)  # type: ignore[misc]

    @classmethod
    def registered_name(cls) -> str:
        """The name this class is registered under (its spec's name while unregistered)."""
        from debias_bench.registry import DATASETS

        for entry in DATASETS:
            if entry.obj is cls:
                return entry.name
        return cls.spec.name

    @classmethod
    def data_options(cls) -> dict[str, DataOption[Any]]:
        """The declared options, by name."""
        return declared_options(cls)

    @classmethod
    def option_names(cls) -> list[str]:
        """The build/read options it accepts (``--data-option KEY=VALUE``)."""
        return list(declared_options(cls))

    def option_values(self) -> dict[str, Any]:
        """Every option's value for this instance (defaults included)."""
        return dict(self._option_values)

    @abstractmethod
    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        """Build the given ratios (default: all) into the data root; return the folder.

        A no-op when already prepared (every file the manifest lists is there), unless
        ``force``. Families that store npy splits do it with ``build_into``."""

    def split_dirs(self, ratio: float) -> tuple[Path, dict[str, Path]]:
        """(folder holding manifest.json, {"train"|"valid"|"test": split folder}) for ``ratio``."""
        raise NotImplementedError(f"{type(self).__name__} does not store npy splits")

    def build_into(
        self,
        folder: Path,
        force: bool,
        build: Callable[[Path], None],
        params: Callable[[], dict[str, Any]],
        shape: tuple[int, int] | None = None,
    ) -> Path:
        """The one way a family (re)builds its prepared ``folder``; returns it.

        Puts back a swap that was interrupted earlier (``settle``); then, unless the folder is
        complete (or ``force``), says in one line why it rebuilds, runs ``build(staging)`` on a
        fresh ``<name>.building`` beside it, seals it (manifest last, then checked:
        ``seal_dataset``) and swaps it in by renames (``replace_dir``). Works under the build
        lock (taken here when the caller does not hold it); a complete folder with nothing
        beside it takes no lock and writes nothing."""
        if not force and not leftovers(folder) and not completeness_problems(folder):
            return folder
        with build_lock(self):
            self._settle(folder)
            problems = completeness_problems(folder)
            if not force and not problems:
                return folder
            if not force and folder.exists():
                print(_rebuild_note(folder, problems), file=sys.stderr)
            staging = folder.with_name(folder.name + BUILDING)
            if staging.exists():
                shutil.rmtree(staging)
            staging.mkdir(parents=True)
            try:
                build(staging)
                seal_dataset(staging, params(), shape=shape)
            except Exception:  # an error, not a kill: the live data untouched, nothing left
                shutil.rmtree(staging, ignore_errors=True)
                raise
            replace_dir(staging, folder)
        return folder

    def _settle(self, folder: Path) -> None:
        """``settle`` under the build lock, its notes on stderr."""
        if not leftovers(folder):
            return
        with build_lock(self):
            for note in settle(folder):
                print(note, file=sys.stderr)

    def _manifest_root(self, ratio: float) -> Path | None:
        """The folder whose manifest covers ``ratio`` (None: the family keeps no npy store, or
        cannot tell where it is)."""
        try:
            return self.split_dirs(ratio)[0]
        except (NotImplementedError, BenchError):
            return None

    def damage(self, ratios: Iterable[float] | None = None) -> list[str]:
        """What is missing from prepared data that has a manifest (a file gone, or of another
        size): data that was built and then damaged. Empty when complete or never built."""
        roots = {self._manifest_root(r) for r in (ratios or self.spec.ratios)}
        problems: list[str] = []
        for root in sorted(r for r in roots if r is not None):
            if (root / MANIFEST).is_file():
                problems += completeness_problems(root)
        return problems

    def ready_to_read(self, ratio: float) -> None:
        """What comes before a run reads ``ratio``: put back a dataset left half-swapped by a
        killed ``prepare``, then refuse one that is damaged (CorruptDataError naming the first
        missing file and the command that repairs it). Data never built is built by
        ``prepare`` as before; data built and then damaged is never rebuilt behind a run."""
        root = self._manifest_root(ratio)
        if root is None:
            return
        self._settle(root)
        problems = self.damage([ratio])
        if problems:
            more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
            raise CorruptDataError(
                f"the prepared data of {self.spec.name} in {root} is incomplete: "
                f"{problems[0]}{more}",
                hint=f"repair it: `{self.repair_command()}`",
            )

    def load(self, ratio: float) -> Splits:
        """Splits for one bias-conflicting ratio (in percent); prepares them when missing and
        checks every file read against the manifest (CorruptDataError on a mismatch, or when
        a prepared file is gone: ``ready_to_read``)."""
        ratio = self.check_ratio(ratio)
        self.ready_to_read(ratio)
        self.prepare([ratio])
        _, dirs = self.split_dirs(ratio)
        self.checked_files(ratio)
        return Splits(
            **{name: load_split(d, name, mmap=self.memory_mapped) for name, d in dirs.items()}
        )

    def repair_command(self) -> str:
        """The command that rebuilds this dataset's prepared data (its non-default build
        options included, so it rebuilds this very folder)."""
        return f"bench data prepare {self.spec.name} --force{self._option_flags()}"

    def _option_flags(self) -> str:
        """`` --data-option KEY=VALUE`` for each build option not at its default."""
        declared = declared_options(type(self))
        return "".join(
            f" --data-option {key}={value}"
            for key, value in self._option_values.items()
            if key in declared and value != declared[key].default
        )

    def checked_files(self, ratio: float) -> dict[str, str]:
        """{relative path: sha256} of the files a run at ``ratio`` reads, checked against the
        manifest (once per instance; memory-mapped files by size and mtime after a first hash)."""
        root, dirs = self.split_dirs(ratio)
        files = [d / f for d in dirs.values() for f in SPLIT_FILES]
        key = (str(root), *(str(f) for f in files))
        if key not in self._verified:
            self._verified[key] = check_files(
                root, files, trust_stat=self.memory_mapped, fix=self.repair_command()
            )
        return self._verified[key]

    def fingerprint(self, ratio: float | None = None) -> str:
        """Content hash of the prepared data a run at ``ratio`` reads (every prepared file when
        None), from the checksums its files were checked against; prepares what is missing.
        Families that keep no npy store are hashed from their loaded splits."""
        try:
            if ratio is not None:
                ratio = self.check_ratio(ratio)
                self.ready_to_read(ratio)
                self.prepare([ratio])
                return fingerprint_of(self.checked_files(ratio))
            root, _ = self.split_dirs(self.spec.ratios[0])
            for r in self.spec.ratios:
                self.ready_to_read(r)
            self.prepare()
            return fingerprint_of(manifest_digests(root, self.repair_command()))
        except NotImplementedError:
            ratios = [ratio] if ratio is not None else list(self.spec.ratios)
            return fingerprint_of(
                {f"{r:g}/{s.name}": _split_digest(s) for r in ratios for s in self.load(r)}
            )

    def remote(self) -> Download | None:
        """The public sources `bench data download NAME` fetches (None: nothing public)."""
        return None

    def find_raw(self) -> Any:
        """Where the raw sources are (no download); DataNotFoundError saying where it looked.
        The default knows no sources and assumes they are there."""
        return None

    def availability(self) -> str | None:
        """None when the data is prepared, its raw sources are present, or its builder fetches
        them itself; otherwise where it looked and the command that gets the data. Prepared
        data with a file missing is a problem too (a run would refuse it): the file is named,
        with the command that repairs it."""
        try:
            damage = self.damage()
            if damage:
                more = f" (and {len(damage) - 1} more)" if len(damage) > 1 else ""
                return (
                    f"{self.spec.name}: the prepared data is incomplete: {damage[0]}{more}\n"
                    f"  repair it with `{self.repair_command()}`"
                )
            if self.is_prepared() or self._recoverable():
                return None
            self.find_raw()
            return None
        except DataNotFoundError as exc:
            if self.auto_download:
                return None
            name = self.spec.name
            lines = [f"{name}: no prepared data and no raw sources. {exc.message}"]
            if exc.hint:
                lines.append(f"  {exc.hint}")
            if self.remote() is not None:
                lines.append(f"  get it with `bench data download {name}`, then prepare it")
            lines.append(f"  once the raw sources are there: `bench data prepare {name}`")
            return "\n".join(lines)

    def write_fixture(self, per_class: int | None = None) -> dict[str, Any]:
        """Write a tiny synthetic stand-in of the raw sources under ``raw_root`` (tests and
        plumbing checks only: results on it mean nothing); returns the data options that build
        it quickly."""
        raise BenchError(f"{self.spec.name} has no fixture generator")

    def version(self) -> str:
        """Identity of the prepared data, recorded in every run."""
        return f"{self.spec.name}-v{self.build_version}"

    @property
    def folder(self) -> Path:
        """Where the prepared data lives (families with build options add a tag)."""
        return self.data_root / self.spec.name / f"v{self.build_version}"

    def is_prepared(self) -> bool:
        """Its manifest (written last) is there and so is every file it lists, with its
        recorded size; a folder missing a file, or left half-swapped, is not prepared."""
        return not completeness_problems(self.folder)

    def _recoverable(self) -> bool:
        """A complete copy of the data sits beside its folder (an interrupted swap), which
        ``prepare`` and a run put back."""
        return any(not completeness_problems(p) for p in leftovers(self.folder))

    def verify(self) -> list[str]:
        """Problems with the prepared data (checksums, counts, sizes); empty when all good."""
        folder = self.folder
        if not (folder / MANIFEST).is_file():
            problems = [f"{self.spec.name} is not prepared ({folder} has no manifest.json)"]
            for left in leftovers(folder):
                state = "complete" if not completeness_problems(left) else "incomplete"
                problems.append(
                    f"{left} is a {state} copy left by an interrupted build or swap: "
                    f"`bench data prepare {self.spec.name}{self._option_flags()}` puts it back "
                    "or rebuilds"
                )
            return problems
        return verify_dataset(folder, self.spec.num_classes, self.spec.num_biases)

    def check_ratio(self, ratio: float) -> float:
        ratio = float(ratio)
        if ratio not in self.spec.ratios:
            valid = ", ".join(f"{r:g}" for r in self.spec.ratios)
            raise ConfigError(
                f"{self.spec.name} has no bias-conflicting ratio {ratio:g}%; valid ratios: {valid}"
            )
        return ratio


SPLIT_FILES = ("images.npy", "attrs.npy")


def _split_digest(split: Split) -> str:
    """SHA-256 of a split's images, labels and biases (families without a manifest)."""
    digest = hashlib.sha256()
    images = split.images.numpy() if isinstance(split.images, torch.Tensor) else split.images
    for start in range(0, len(images), 4096):
        digest.update(np.ascontiguousarray(images[start : start + 4096]).tobytes())
    digest.update(split.labels.numpy().tobytes())
    digest.update(split.biases.numpy().tobytes())
    return digest.hexdigest()


_HELD = threading.local()  # the build locks this thread holds (``build_lock`` nests)


@contextlib.contextmanager
def build_lock(family: DatasetFamily) -> Iterator[None]:
    """One process at a time prepares (and first reads) a family in a data root: the workers
    of a sweep (or Slurm jobs sharing the data root) that start on an unbuilt dataset wait for
    the first one's build instead of writing the same staging folder at once. A thread that
    holds the lock may take it again (``prepare`` inside a caller's lock)."""
    folder = family.data_root / family.spec.name
    key = os.path.abspath(folder)
    held: set[str] = _HELD.__dict__.setdefault("paths", set())
    if key in held:
        yield
        return
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(folder / ".build.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print(f"waiting for another process preparing {family.spec.name}...", file=sys.stderr)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:  # no lock support (some network file systems): go on unlocked
            pass
        held.add(key)
        yield
    finally:
        held.discard(key)
        os.close(fd)  # releases the lock


#: suffixes of a build's staging folder beside the live one (``<name>.building``, imports)
BUILDING, IMPORTING = ".building", ".importing"
#: a live folder renamed aside during a swap: ``<name>.old-<pid>``
OLD_MARK = ".old-"


def leftovers(folder: Path) -> list[Path]:
    """Folders beside ``folder`` left by a build or swap that did not finish: its staging
    (``<name>.building`` / ``<name>.importing``) and old copies set aside (``<name>.old-*``)."""
    try:
        siblings = list(folder.parent.iterdir())
    except OSError:
        return []
    staging = {folder.name + BUILDING, folder.name + IMPORTING}
    return sorted(
        p
        for p in siblings
        if (p.name in staging or p.name.startswith(folder.name + OLD_MARK)) and p.is_dir()
    )


def _set_aside(target: Path) -> Path:
    """Swap step 1: rename the live folder to ``<name>.old-<pid>``."""
    old = target.with_name(f"{target.name}{OLD_MARK}{os.getpid()}")
    if old.exists():  # left by an earlier process with this pid
        shutil.rmtree(old)
    os.rename(target, old)
    return old


def _put_in_place(new: Path, target: Path) -> None:
    """Swap step 2: rename the new folder to the live name (free after step 1)."""
    os.rename(new, target)
    _sync_dir(target.parent)


def _discard(old: Path) -> None:
    """Swap step 3: delete the old folder."""
    if old.exists():
        shutil.rmtree(old)


def _sync_dir(folder: Path) -> None:
    """Make the renames in ``folder`` durable (where the file system allows it)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def replace_dir(staging: Path, target: Path) -> None:
    """Put the finished folder ``staging`` (a sibling of ``target``) at ``target``: rename the
    live folder aside, rename the new one into place, delete the old one. Killed at any
    point, it leaves a complete folder under the live name, or the live name missing beside
    complete siblings (which ``settle`` puts back); never a live folder with files missing."""
    target.parent.mkdir(parents=True, exist_ok=True)
    old = _set_aside(target) if target.exists() else None
    _put_in_place(staging, target)
    if old is not None:
        _discard(old)


def settle(folder: Path) -> list[str]:
    """Finish or undo a build or swap at ``folder`` that a kill interrupted (call it under the
    build lock, so no live build's staging is touched); returns the one line saying what it
    did (empty: nothing was left).

    * live folder complete: the leftovers beside it are removed (an unfinished staging, a
      finished one whose swap never began, or the old copy whose deletion was cut short);
    * live folder missing or incomplete: the complete leftover is renamed into place (a
      finished staging first, else the old copy), the rest removed; with none complete, the
      leftovers are removed and the caller rebuilds."""
    stale = leftovers(folder)
    if not stale:
        return []
    recovered = None
    if completeness_problems(folder):
        ranked = sorted(stale, key=lambda p: (OLD_MARK in p.name, -p.stat().st_mtime))
        recovered = next((p for p in ranked if not completeness_problems(p)), None)
        if recovered is not None:
            if folder.exists():
                stale.append(_set_aside(folder))
            _put_in_place(recovered, folder)
            stale.remove(recovered)
    stale = [p for p in dict.fromkeys(stale) if p.exists()]
    for path in stale:
        _discard(path)
    removed = ", ".join(p.name for p in stale)
    if recovered is not None:
        tail = f" (removed {removed})" if removed else ""
        return [
            f"note: {folder} was left half-swapped by an interrupted build; "
            f"recovered the complete copy {recovered.name}{tail}"
        ]
    return [f"note: removed what an interrupted build left beside {folder}: {removed}"]


def _rebuild_note(folder: Path, problems: list[str]) -> str:
    """The one line ``build_into`` prints before it rebuilds a folder that is there."""
    if not (folder / MANIFEST).is_file():
        return f"note: {folder} has no manifest.json; rebuilding it"
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"note: {folder} is incomplete: {problems[0]}{more}; rebuilding it"


def ratio_dirname(ratio: float) -> str:
    """1.0 -> '1pct', 0.5 -> '0.5pct' (the DisEnt / BiasEnsemble folder names)."""
    return f"{ratio:g}pct"


def save_split(folder: Path, split: Split) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    images = split.images.numpy() if isinstance(split.images, torch.Tensor) else split.images
    np.save(folder / "images.npy", np.ascontiguousarray(images, dtype=np.uint8))
    attrs = torch.stack([split.labels, split.biases], dim=1).numpy().astype(np.int64)
    np.save(folder / "attrs.npy", attrs)


def load_split(folder: Path, name: str, mmap: bool = False) -> Split:
    """Read one split; ``mmap`` keeps the images on disk (for the 224-px sets)."""
    paths = [folder / "images.npy", folder / "attrs.npy"]
    for path in paths:
        if not path.is_file():
            raise CorruptDataError(
                f"prepared split is incomplete: {path} is missing",
                hint="delete the folder and run `bench data prepare` again",
            )
    try:
        images = np.load(paths[0], mmap_mode="r" if mmap else None)
        attrs = np.load(paths[1])
    except (ValueError, OSError, EOFError) as exc:
        raise CorruptDataError(
            f"cannot read {paths[0].parent}: {exc}",
            hint="delete the folder and run `bench data prepare` again",
        ) from exc
    if images.dtype != np.uint8 or images.ndim != 4 or attrs.ndim != 2 or attrs.shape[1] < 2:
        raise CorruptDataError(
            f"{folder}: expected uint8 images N x H x W x C and attrs N x 2, got "
            f"{images.dtype} {images.shape} and {attrs.shape}"
        )
    return Split(
        images=images if mmap else torch.from_numpy(images),
        labels=torch.from_numpy(attrs[:, 0].astype(np.int64)),
        biases=torch.from_numpy(attrs[:, 1].astype(np.int64)),
        name=name,
    )


def publish_dataset(
    staging: Path,
    target: Path,
    params: dict[str, Any],
    shape: tuple[int, int] | None = None,
) -> None:
    """Write the manifest (parameters, checksums, sizes) last, check the new folder, and swap
    it in for ``target`` (``replace_dir``: the old data stays whole until the new is in place).

    The manifest also records every split's size, image shape and class x bias counts
    (``shape`` = (num_classes, num_biases), inferred from the labels when not given), which
    ``verify_dataset`` checks."""
    seal_dataset(staging, params, shape)
    replace_dir(staging, target)


def seal_dataset(
    staging: Path, params: dict[str, Any], shape: tuple[int, int] | None = None
) -> None:
    """Write the manifest of the finished build in ``staging`` (last: it marks the build
    complete) and check the folder against it. Reading every split for its counts is the
    check of the arrays (readable, labels and biases in range); then every listed file must be
    there with its size. CorruptDataError when not, before any swap begins."""
    skip = {staging / MANIFEST, staging / VERIFIED_CACHE}
    files = sorted(p for p in staging.rglob("*") if p.is_file() and p not in skip)
    rels = {p.relative_to(staging).as_posix(): p for p in files}
    manifest: dict[str, Any] = {
        "params": params,
        "files": {rel: sha256(p) for rel, p in rels.items()},
        "sizes": {rel: p.stat().st_size for rel, p in rels.items()},
    }
    if shape is None:
        shape = infer_shape(staging)
    if shape is not None:
        manifest["shape"] = list(shape)
        manifest["splits"] = describe_dataset(staging, *shape)
    _write_manifest(staging, manifest)
    problems = completeness_problems(staging)
    if problems:
        raise CorruptDataError(
            f"the new build in {staging} failed its check: {problems[0]}",
            hint="the data in use was left as it was; build again",
        )


def _write_manifest(folder: Path, manifest: dict[str, Any]) -> None:
    """Write ``manifest.json`` whole or not at all (temporary name, fsync, rename)."""
    tmp = folder / f"{MANIFEST}.tmp"
    with open(tmp, "w") as handle:
        handle.write(json.dumps(manifest, indent=2, sort_keys=True))
        handle.flush()
        with contextlib.suppress(OSError):
            os.fsync(handle.fileno())
    os.replace(tmp, folder / MANIFEST)


def verify_manifest(folder: Path) -> list[str]:
    """Problems found when re-hashing a prepared dataset (empty list: all good)."""
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        return [f"{manifest_path} is missing"]
    manifest = json.loads(manifest_path.read_text())
    problems = []
    for rel, digest in manifest["files"].items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"{path} is missing")
        elif sha256(path) != digest:
            problems.append(f"{path} does not match its checksum")
    return problems


def split_folders(folder: Path) -> list[Path]:
    """Every prepared split under a dataset folder (each holds ``images.npy``)."""
    return sorted(p.parent for p in folder.rglob("images.npy"))


def describe_split(folder: Path, num_classes: int, num_biases: int) -> dict[str, Any]:
    """Sample count, image shape and the class x bias count matrix of one prepared split."""
    images = np.load(folder / "images.npy", mmap_mode="r")
    attrs = np.load(folder / "attrs.npy")
    labels, biases = attrs[:, 0].astype(np.int64), attrs[:, 1].astype(np.int64)
    if len(labels) and (labels.max() >= num_classes or biases.max() >= num_biases):
        raise CorruptDataError(f"{folder}: label or bias outside the dataset's range")
    counts = np.bincount(labels * num_biases + biases, minlength=num_classes * num_biases)
    return {
        "n": len(labels),
        "image_shape": list(images.shape[1:]),
        "counts": counts.reshape(num_classes, num_biases).tolist(),
    }


def describe_dataset(folder: Path, num_classes: int, num_biases: int) -> dict[str, Any]:
    """``describe_split`` for every split, keyed by its path relative to ``folder``."""
    return {
        str(p.relative_to(folder)): describe_split(p, num_classes, num_biases)
        for p in split_folders(folder)
    }


def verify_dataset(folder: Path, num_classes: int, num_biases: int) -> list[str]:
    """Checksums (``verify_manifest``) plus counts and image sizes against the manifest."""
    problems = verify_manifest(folder)
    manifest_path = folder / "manifest.json"
    if not manifest_path.is_file():
        return problems
    manifest = json.loads(manifest_path.read_text())
    expected = manifest.get("splits")
    if expected is None:
        return problems
    num_classes, num_biases = manifest.get("shape", (num_classes, num_biases))
    for rel, want in expected.items():
        if not all((folder / rel / name).is_file() for name in SPLIT_FILES):
            continue  # already reported as missing
        try:
            got = describe_split(folder / rel, num_classes, num_biases)
        except (ValueError, OSError, EOFError) as exc:
            problems.append(f"{folder / rel}: cannot read ({exc})")
            continue
        for key in ("n", "image_shape", "counts"):
            if got[key] != want[key]:
                problems.append(f"{folder / rel}: {key} is {got[key]}, manifest says {want[key]}")
    return problems


def infer_shape(folder: Path) -> tuple[int, int] | None:
    """(num_classes, num_biases) as 1 + the largest label and bias in any split."""
    most = [-1, -1]
    for split in split_folders(folder):
        attrs = np.load(split / "attrs.npy")
        if len(attrs):
            most = [max(most[0], int(attrs[:, 0].max())), max(most[1], int(attrs[:, 1].max()))]
    return None if most[0] < 0 else (most[0] + 1, most[1] + 1)
