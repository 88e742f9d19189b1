"""Base class of a dataset family and the on-disk store of prepared splits.

Prepared splits use the LfF npy layout, one folder per split::

    <split>/images.npy   uint8  N x H x W x C
    <split>/attrs.npy    int64  N x 2   ([label, bias])

plus a ``manifest.json`` per prepared dataset with its build parameters and the SHA-256 of every
file: ``load`` checks the files a run reads against it (``debias_bench.integrity``) and
``verify`` checks everything, counts included. Folders are written to a temporary name and
renamed into place, so an interrupted build never leaves a half-written dataset behind.
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
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import torch

from debias_bench.data import DatasetSpec, Split, Splits
from debias_bench.data_options import DataOption, check_options, declared_options
from debias_bench.download import Download
from debias_bench.errors import BenchError, ConfigError, CorruptDataError, DataNotFoundError
from debias_bench.integrity import check_files, fingerprint_of, manifest_digests, sha256


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

        A no-op when already prepared (a manifest exists), unless ``force``."""

    def split_dirs(self, ratio: float) -> tuple[Path, dict[str, Path]]:
        """(folder holding manifest.json, {"train"|"valid"|"test": split folder}) for ``ratio``."""
        raise NotImplementedError(f"{type(self).__name__} does not store npy splits")

    def load(self, ratio: float) -> Splits:
        """Splits for one bias-conflicting ratio (in percent); prepares them when missing and
        checks every file read against the manifest (CorruptDataError on a mismatch)."""
        ratio = self.check_ratio(ratio)
        self.prepare([ratio])
        _, dirs = self.split_dirs(ratio)
        self.checked_files(ratio)
        return Splits(
            **{name: load_split(d, name, mmap=self.memory_mapped) for name, d in dirs.items()}
        )

    def repair_command(self) -> str:
        """The command that rebuilds this dataset's prepared data."""
        return f"bench data prepare {self.spec.name} --force"

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
                self.prepare([ratio])
                return fingerprint_of(self.checked_files(ratio))
            root, _ = self.split_dirs(self.spec.ratios[0])
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
        them itself; otherwise where it looked and the command that gets the data."""
        try:
            if self.is_prepared():
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
        return (self.folder / "manifest.json").is_file()

    def verify(self) -> list[str]:
        """Problems with the prepared data (checksums, counts, sizes); empty when all good."""
        if not self.is_prepared():
            return [f"{self.spec.name} is not prepared ({self.folder} has no manifest.json)"]
        return verify_dataset(self.folder, self.spec.num_classes, self.spec.num_biases)

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


@contextlib.contextmanager
def build_lock(family: DatasetFamily) -> Iterator[None]:
    """One process at a time prepares (and first reads) a family in a data root: the workers
    of a sweep (or Slurm jobs sharing the data root) that start on an unbuilt dataset wait for
    the first one's build instead of writing the same staging folder at once."""
    folder = family.data_root / family.spec.name
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
        yield
    finally:
        os.close(fd)  # releases the lock


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
    """Write the manifest (parameters + checksums) and atomically move staging to target.

    The manifest also records every split's size, image shape and class x bias counts
    (``shape`` = (num_classes, num_biases), inferred from the labels when not given), which
    ``verify_dataset`` checks."""
    files = sorted(p for p in staging.rglob("*") if p.is_file())
    manifest: dict[str, Any] = {
        "params": params,
        "files": {str(p.relative_to(staging)): sha256(p) for p in files},
    }
    if shape is None:
        shape = infer_shape(staging)
    if shape is not None:
        manifest["shape"] = list(shape)
        manifest["splits"] = describe_dataset(staging, *shape)
    (staging / "manifest.json").write_text(json.dumps(manifest, indent=2, sort_keys=True))
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)


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
        if not (folder / rel / "images.npy").is_file():
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
