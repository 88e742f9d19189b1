"""The on-disk store of prepared splits: the npy layout and its manifest.

Prepared splits use the LfF npy layout, one folder per split::

    <split>/images.npy   uint8  N x H x W x C
    <split>/attrs.npy    int64  N x 2   ([label, bias])

plus a ``manifest.json`` per prepared dataset with its build parameters and the SHA-256 and size
of every file (``seal_dataset`` writes it last: it marks the build complete), and every split's
size, image shape and class x bias counts, which ``verify_dataset`` checks.

Writing and checking the store needs NumPy only: a dataset build writes ``SplitArrays``
(``save_split``) without importing torch. Reading a split back as a torch ``Split`` is
``debias_bench.data.split_loading.load_split``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from debias_bench.data.folder_swap import replace_dir
from debias_bench.data.integrity import (
    MANIFEST,
    VERIFIED_CACHE,
    completeness_problems,
    fingerprint_of,
    manifest_digests,
    record_stamps,
    sha256,
    stamp,
)
from debias_bench.data.spec import SplitLike, range_problems
from debias_bench.errors import BenchError, CorruptDataError

SPLIT_FILES = ("images.npy", "attrs.npy")


def prepared_fingerprint(family: Any, ratio: float) -> str | None:
    """What ``family.fingerprint(ratio)`` gives (a ``DatasetFamily``: the fingerprint a run at
    ``ratio`` records), read from the manifest of its prepared data without hashing or
    building anything; None when that is not complete, or the family keeps no npy store (then
    only loading its splits tells)."""
    try:
        root, dirs = family.split_dirs(family.check_ratio(ratio))
    except (NotImplementedError, BenchError):
        return None
    if completeness_problems(root):
        return None
    digests = manifest_digests(root, fix=family.repair_command())
    rels = [(d / f).relative_to(root).as_posix() for d in dirs.values() for f in SPLIT_FILES]
    return fingerprint_of({rel: digests[rel] for rel in rels if rel in digests})


def split_digest(split: SplitLike) -> str:
    """SHA-256 of a split's images, labels and biases (families without a manifest)."""
    digest = hashlib.sha256()
    images = np.asarray(split.images)  # a CPU tensor or a memory map: a view, no copy
    for start in range(0, len(images), 4096):
        digest.update(np.ascontiguousarray(images[start : start + 4096]).tobytes())
    digest.update(np.asarray(split.labels).tobytes())
    digest.update(np.asarray(split.biases).tobytes())
    return digest.hexdigest()


def ratio_dirname(ratio: float) -> str:
    """1.0 -> '1pct', 0.5 -> '0.5pct' (the DisEnt / BiasEnsemble folder names)."""
    return f"{ratio:g}pct"


def save_split(folder: Path, split: SplitLike) -> None:
    """Write one split (a ``SplitArrays`` or a ``Split`` on the CPU) into ``folder`` as
    ``images.npy`` (uint8) and ``attrs.npy`` (int64 ``[label, bias]``)."""
    labels, biases = np.asarray(split.labels), np.asarray(split.biases)
    if len(split.images) != len(labels) or len(biases) != len(labels):
        raise ValueError(
            f"split for {folder}: {len(split.images)} images, {len(labels)} labels, "
            f"{len(biases)} bias labels; they must match"
        )
    folder.mkdir(parents=True, exist_ok=True)
    np.save(folder / "images.npy", np.ascontiguousarray(split.images, dtype=np.uint8))
    np.save(folder / "attrs.npy", np.stack([labels, biases], axis=1).astype(np.int64))


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
    stamps = {rel: stamp(p, "") for rel, p in rels.items()}  # size and mtime before hashing
    for rel, p in rels.items():
        stamps[rel][2] = sha256(p)
    manifest: dict[str, Any] = {
        "params": params,
        "files": {rel: digest for rel, (_, _, digest) in stamps.items()},
        "sizes": {rel: size for rel, (size, _, _) in stamps.items()},
    }
    if shape is None:
        shape = infer_shape(staging)
    if shape is not None:
        manifest["shape"] = list(shape)
        manifest["splits"] = describe_dataset(staging, *shape)
    _write_manifest(staging, manifest)
    record_stamps(staging, stamps)  # just hashed: the up-front check trusts them (a stat)
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
    problems, stamps = [], {}
    for rel, digest in manifest["files"].items():
        path = folder / rel
        if not path.is_file():
            problems.append(f"{path} is missing")
            continue
        now = stamp(path, digest)
        if sha256(path) != digest:
            problems.append(f"{path} does not match its checksum")
        else:
            stamps[rel] = now
    record_stamps(folder, stamps)
    return problems


def split_folders(folder: Path) -> list[Path]:
    """Every prepared split under a dataset folder (each holds ``images.npy``)."""
    return sorted(p.parent for p in folder.rglob("images.npy"))


def describe_split(folder: Path, num_classes: int, num_biases: int) -> dict[str, Any]:
    """Sample count, image shape and the class x bias count matrix of one prepared split."""
    images = np.load(folder / "images.npy", mmap_mode="r")
    labels, biases = read_attrs(folder)
    problems = range_problems(folder.name, labels, biases, num_classes, num_biases)
    if problems:
        raise CorruptDataError(f"{folder}: {'; '.join(problems)}")
    counts = np.bincount(labels * num_biases + biases, minlength=num_classes * num_biases)
    return {
        "n": len(labels),
        "image_shape": list(images.shape[1:]),
        "counts": counts.reshape(num_classes, num_biases).tolist(),
    }


def read_attrs(folder: Path) -> tuple[np.ndarray, np.ndarray]:
    """(labels, biases) of the prepared split in ``folder`` (its small ``attrs.npy`` only)."""
    attrs = np.load(folder / "attrs.npy")
    if attrs.ndim != 2 or attrs.shape[1] < 2:
        raise CorruptDataError(f"{folder / 'attrs.npy'}: expected N x 2, got {attrs.shape}")
    return attrs[:, 0].astype(np.int64), attrs[:, 1].astype(np.int64)


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
