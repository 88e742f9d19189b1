"""Shared fixtures: the raw-data root, a session data root, a tiny in-memory dataset, and the
check that no test module leaves entries behind in the global registries."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from support.processes import bench_env
from support.toy import ToyFamily  # noqa: F401  (registers the toy dataset)

from debias_bench.launchers import LAUNCHERS
from debias_bench.plugins import loading as plugins
from debias_bench.registry import DATASETS, METHODS, Entry, Registry
from debias_bench.reporting import TABLES
from debias_bench.tracking import TRACKERS

REPO = Path(__file__).resolve().parents[1]

#: Modules that take minutes (real training, sweeps through worker processes), slowest first:
#: collected first, so that pytest-xdist's ``loadscope`` hands them out before the short ones
#: and its workers finish together instead of one waiting on a long module started last.
SLOW_MODULES = (
    "test_regress.py",
    "test_ray.py",
    "test_launch_local.py",
    "test_real_effect.py",
    "test_slurm.py",
    "test_tracking.py",
    "test_readme_plugins.py",
    "test_code_identity.py",
    "test_end_sd_selecmix_real.py",
    "test_groupdro_jtt_pgd_real.py",
    "test_lff_family_real.py",
)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker per core and one more. Many tests wait on processes they
    started (signals, Slurm, Ray, local sweeps); on 2 cores the CPUs sat idle 9 % of the
    suite with 2 workers (vmstat, 2026-11-29), and a third worker fills that."""
    return (os.cpu_count() or 1) + 1


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(SLOW_MODULES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: the rest as found


def _raw_root() -> Path:
    env = os.environ.get("BENCH_RAW_ROOT")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="session")
def raw_root() -> Path:
    root = _raw_root()
    if not (root / "mnist" / "train-images-idx3-ubyte.gz").is_file():
        pytest.skip(f"real MNIST not found under {root}/mnist (set BENCH_RAW_ROOT)")
    return root


@pytest.fixture(scope="session")
def data_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Prepared data shared by the whole session (Colored MNIST is built once). Under
    pytest-xdist the workers share one folder: a dataset that two of them prepare at once is
    built by one while the other waits on bench's build lock (tests/data/test_build_lock.py)."""
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        base = base.parent  # the session's folder, above each worker's own
    root = base / "shared-data"
    root.mkdir(exist_ok=True)
    return root


#: the thread count of the real-data modules: the order of a float reduction, hence a result's
#: last digits, follows the thread count, so a pinned count gives the same numbers on any
#: machine (each module's docstring says which count its numbers were measured with); one,
#: because tox runs one pytest-xdist worker per core (two threads per worker made the
#: real-data tests 3-6x slower)
REALDATA_THREADS = 1


@pytest.fixture(scope="module", autouse=True)
def _realdata_threads(request: pytest.FixtureRequest):
    """Pin torch's threads for a module marked ``realdata`` (before its module fixtures, such
    as a Vanilla reference run), so its thresholds see the numbers they were set against."""
    if request.node.get_closest_marker("realdata") is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(REALDATA_THREADS)
    yield
    torch.set_num_threads(before)


# ------------------------------------------------------------------ the global registries
#: every registry a plugin (or a test) can add to; a test module sees what earlier modules of
#: its pytest-xdist worker left in them, so each module must leave them as it found them
REGISTRIES: tuple[Registry[object], ...] = (METHODS, DATASETS, LAUNCHERS, TABLES, TRACKERS)
Snapshot = list[dict[str, Entry[object]]]


def _snapshot() -> Snapshot:
    """The entries of every registry, built-ins loaded first (so that a module's first lookup,
    which imports them, is not taken for a leak)."""
    for registry in REGISTRIES:
        registry.names()
    return [dict(registry._entries) for registry in REGISTRIES]


def _restore(before: Snapshot, since: set[str]) -> list[str]:
    """Put every registry back as ``before`` (order kept); returns what differed, as
    ``"kind name"``. A module imported since ``before`` (names in ``since``) that registered an
    entry taken out is dropped from ``sys.modules`` too, so that importing it again (a plugin
    named in ``BENCH_PLUGINS``) registers its entries again."""
    changed = []
    for registry, entries in zip(REGISTRIES, before, strict=True):
        now = registry._entries
        for name in now.keys() | entries.keys():
            entry = now.get(name)
            if entry is entries.get(name):
                continue
            changed.append(f"{registry.kind} {name!r}")  # added, removed or replaced
            module = getattr(entry and entry.obj, "__module__", None)
            if module in since:
                sys.modules.pop(module, None)
                plugins._FROM_PATH.pop(module, None)
        now.clear()
        now.update(entries)
    return sorted(changed)


@pytest.fixture
def registries_restored() -> Iterator[None]:
    """For a test that registers entries (directly, or by importing a plugin in this
    process): every registry is put back as it was once the test ends."""
    before, modules = _snapshot(), set(sys.modules)
    yield
    _restore(before, set(sys.modules) - modules)


@pytest.fixture(scope="module", autouse=True)
def _registries_unchanged(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test module that leaves the registries changed (for instance a plugin method it
    registered, which a later module of the same worker would find), naming what it left;
    the registries are put back either way, so that the leak fails this module only."""
    before, modules = _snapshot(), set(sys.modules)
    yield
    leaked = _restore(before, set(sys.modules) - modules)
    if leaked:
        pytest.fail(
            f"{request.node.nodeid} left the registries changed: {', '.join(leaked)}; "
            "register in a test that uses the `registries_restored` fixture",
            pytrace=False,
        )


@pytest.fixture
def toy_place(tmp_path: Path):
    from debias_bench.paths import DataPlace

    return DataPlace(tmp_path / "raw", tmp_path / "data")


@pytest.fixture
def in_process(tmp_path, monkeypatch, capsys, registries_restored):
    """`bench` called in this process (its workers are still subprocesses): cheaper than a
    new interpreter per call; what its plugins register is unregistered after the test.
    Returns ``(exit code, stdout, stderr)``."""
    from debias_bench.cli import main
    from debias_bench.training import run_setup

    # a new `bench` process reads its data afresh; this one may hold the last test's, under
    # the same path when that test's folder was removed and its name given again (pytest
    # keeps only failed tests' folders), and the scripted dataset's images count their reads
    run_setup._DATA_CACHE.clear()
    for key, value in bench_env(tmp_path).items():
        if key != "PYTHONPATH":
            monkeypatch.setenv(key, value)

    def call(*args: str) -> tuple[int, str, str]:
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return call
