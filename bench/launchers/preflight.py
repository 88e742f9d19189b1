"""Checks made before a single run directory exists, and before a command reads a run store.

A sweep that cannot work should fail in one line before it records anything: a run store that
is a file, read-only or a path no file system takes, a device that does not exist, a dataset
with no data and no way to get it, a data root the runs cannot write, a launcher whose workers
cannot import what they need. (Hyperparameters and data options are checked when the grid is
expanded, in ``debias_bench.config.run_config`` and ``debias_bench.config.grid``; numeric flags
when the command
line is parsed, ``debias_bench.commands.flags.number``.) The commands that only read a run
store (``bench status``, ``bench report``, ``bench regress``) check that it is one
(:func:`check_store`). Every check leaves the disk as it found it, but for one step that is
no check: a dataset whose builder fetches its own raw sources (Colored MNIST's mirrors)
fetches them in :func:`check_data`, once, as its first run would have (a failed fetch is then
one error instead of one failed run per ratio).
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import re
import tempfile
from collections.abc import Iterable
from pathlib import Path

from debias_bench.config.run_config import RunConfig
from debias_bench.data.raw_checks import check_raw_sources
from debias_bench.errors import BenchError, ConfigError, CorruptDataError
from debias_bench.paths import DataPlace, check_path, existing_ancestor
from debias_bench.registry import BACKBONES, DATASETS, load_attribute
from debias_bench.training.devices import resolve_device

_DEVICE = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


def _probe_writable(folder: Path, what: str, fix: str) -> None:
    """``folder`` (which need not exist yet) can be created and written: its nearest existing
    ancestor is a directory in which a file can be made. Leaves nothing behind."""
    there = existing_ancestor(folder)
    if not there.is_dir():
        raise ConfigError(
            f"{what} {folder} cannot be created: {there} is a file, not a directory", hint=fix
        )
    lock = folder / ".build.lock"
    try:
        with tempfile.NamedTemporaryFile(dir=there, prefix=".write-check-"):
            pass
        if lock.exists():  # the lock every run takes: opened for writing (debias_bench.data.family)
            os.close(os.open(lock, os.O_RDWR))
    except OSError as exc:
        reason = exc.strerror or str(exc)
        raise ConfigError(
            f"{what} {folder} is not writable: {there} refuses writes ({reason})", hint=fix
        ) from None


def check_out(out: Path) -> Path:
    """The run store directory, created if needed; an error when it cannot be written, with
    nothing left behind (folders this check created are removed again)."""
    check_path(out, "--out")
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory", hint="pick a directory")
    missing = [p for p in [out, *out.parents] if not os.path.lexists(p)]
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".write-check-"):
            pass
    except OSError as exc:
        for folder in missing:  # deepest first: only what this check made, if still empty
            with contextlib.suppress(OSError):
                folder.rmdir()
        hint = "pick a directory you can write to"
        if exc.errno == errno.ENAMETOOLONG:
            hint = "pick a shorter path"
        raise ConfigError(
            f"--out {out} is not writable ({exc.strerror or exc})", hint=hint
        ) from None
    return out


def check_data_root(configs: Iterable[RunConfig], place: DataPlace) -> None:
    """Every run takes a lock in ``<data root>/<dataset>`` and builds or downloads there when
    the data is not prepared (``debias_bench.data.family.build_lock``): that folder must be
    writable, also when the data root is the default one under ``$HOME``."""
    check_path(place.data_root, "--data-root")
    fix = (
        "point --data-root (or $BENCH_DATA_ROOT) at a writable directory; the default is "
        "$XDG_CACHE_HOME/debias-bench/data or ~/.cache/debias-bench/data"
    )
    for dataset in dict.fromkeys(c.dataset for c in configs):
        family = DATASETS.get(dataset)
        _probe_writable(place.data_root / family.spec.name, "the data folder", fix)


#: what the local launcher's workers import before any run (``launchers.preload``: the warm
#: fork server imports these first; a cold worker the first time a run needs them)
WORKER_IMPORTS = ("torchvision", "torch._dynamo")


def check_worker_imports(launcher: str, modules: Iterable[str] = WORKER_IMPORTS) -> None:
    """A launcher whose workers import ``modules`` (local: torchvision in every worker, even
    for an MLP run) fails here, once, with the import error and the fix, instead of a
    traceback in every worker after its run was recorded."""
    if launcher != "local":
        return
    for module in modules:
        try:
            importlib.import_module(module)
        except Exception as exc:  # a broken install raises anything (RuntimeError, OSError...)
            import torch

            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            raise ConfigError(
                f"the local launcher's workers cannot import {module}: "
                f"{type(exc).__name__}: {first}; nothing was started",
                hint=f"install a {module.split('.')[0]} that matches torch {torch.__version__} "
                "(e.g. `pip install --force-reinstall torchvision` with the torch index you "
                "installed torch from), or use --launcher inline",
            ) from None


def check_device(name: str) -> None:
    if not _DEVICE.fullmatch(name):
        raise ConfigError(f"unknown --device {name!r}", hint="auto, cpu, cuda, cuda:N or mps")
    resolve_device(name)  # a clear error when CUDA is asked for and not there


def check_data(configs: Iterable[RunConfig], place: DataPlace) -> None:
    """Every dataset (with its build options) of the grid is usable by its runs, else one
    error naming each problem and its fix, before any run folder exists:

    * prepared, buildable from raw sources on disk, or fetched now by a builder that fetches
      its own (``DatasetFamily.availability``: one download, not one failed run per ratio);
    * raw files with known checksums (MNIST's idx files) are sound when the data is to be
      built from them (``raw_checks``);
    * what is prepared holds what its manifest says in every file the grid's runs read (a
      ``stat`` per file against the stamp of its last full hash, a hash where that changed)
      and labels in range (``DatasetFamily.content_problems``)."""
    configs = list(configs)
    check_data_root(configs, place)  # first: a builder that fetches its sources writes there
    grid: dict[tuple[str, str], tuple[RunConfig, set[float]]] = {}
    for config in configs:
        key = (config.dataset, repr(sorted(config.data_options.items())))
        grid.setdefault(key, (config, set()))[1].add(float(config.ratio))
    missing: list[str] = []
    changed: list[str] = []
    for config, ratios in grid.values():
        family = DATASETS.get(config.dataset)(
            place.raw_root, place.data_root, **config.data_options
        )
        problem = family.availability(fetch=True)
        if problem:
            named = problem.startswith(config.dataset)
            missing.append(problem if named else f"{config.dataset}: {problem}")
            continue
        if not family.is_prepared():  # its first run builds it: from raw files that are sound
            try:
                check_raw_sources(family)
            except CorruptDataError as exc:
                changed.append(f"{config.dataset}: {exc}")
                continue
        files, labels = family.content_problems(sorted(ratios))
        spec, repair = family.spec, family.repair_command()
        for found, what, fix in (
            (files, "was changed after it was built", f"rebuild it with `{repair}`"),
            (
                labels,
                f"holds labels outside its spec ({spec.num_classes} classes, "
                f"{spec.num_biases} bias labels)",
                f"fix the dataset's build or its spec, then `{repair}`",
            ),
        ):
            if found:
                more = f" (and {len(found) - 1} more)" if len(found) > 1 else ""
                changed.append(
                    f"{config.dataset}: the prepared data {what}: {found[0]}{more}\n  hint: {fix}"
                )
    if missing or changed:
        what = "data missing" if not changed else "data not usable"
        listed = "\n".join(missing + changed).replace("\n", "\n  ")
        raise ConfigError(f"{what}; nothing was started:\n  {listed}")


def check_weights(configs: Iterable[RunConfig]) -> None:
    """Every pretrained backbone of the grid finds its weights (a backbone declared with
    ``weights``: its locator, given the run's ``pretrained_weights``), else one error naming
    each backbone, where it looked and the fix, before any run folder exists (instead of one
    failed run per cell)."""
    wanted = {(c.hparams["backbone"], c.hparams.get("pretrained_weights")): None for c in configs}
    problems = []
    for name, explicit in wanted:
        locate = BACKBONES.entry(name).meta.get("weights") if name in BACKBONES else None
        if locate is None:
            continue
        try:
            (load_attribute(locate) if isinstance(locate, str) else locate)(explicit)
        except BenchError as exc:
            problems.append(f"{name}: {exc}")  # with its hint
    if problems:
        listed = "\n".join(problems).replace("\n", "\n  ")
        raise ConfigError(f"pretrained weights missing; nothing was started:\n  {listed}")


def check_seeds(seeds: list[int]) -> list[int]:
    bad = [s for s in seeds if s < 0]
    if bad:
        raise ConfigError(f"--seeds must be integers >= 0, not {bad}")
    return list(dict.fromkeys(seeds))


def unique(values: list[float]) -> list[float]:
    """``[5, 5.0, 1]`` -> ``[5.0, 1.0]``: duplicate grid entries collapse before launch."""
    return list(dict.fromkeys(float(v) for v in values))
