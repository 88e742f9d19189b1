"""Runs of the store whose method or dataset no loaded plugin registers: `bench report` cannot
place them (nor tell whether their code changed), so it sets them apart and says which names
are missing and how to load the plugin that registers them (``BENCH_PLUGINS``), instead of
failing on the first one or printing an empty report."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from debias_bench.plugins.loading import PLUGINS_ENV
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.jsonio import read_json
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore


def unregistered(run_dir: RunDir) -> tuple[list[str], dict[str, str]]:
    """``["method mine", "dataset tiny"]``: the run's names that nothing registers ([] when
    all are registered, or its config cannot be read: then it is corrupt, listed as such),
    and its recorded protocol and preset."""
    try:  # as written: RunDir.config() verifies it, against the registry too
        config = read_json(run_dir.config_path)
        names = [("method", config["method"], METHODS), ("dataset", config["dataset"], DATASETS)]
        recorded = {k: str(config.get(k, "")) for k in ("protocol", "preset")}
    except Exception:  # unreadable or foreign: its fault is reported with the other runs
        return [], {}
    return [f"{kind} {name}" for kind, name, registry in names if name not in registry], recorded


@dataclass
class ForeignRuns:
    """The store's runs of unregistered names, and how many runs name each."""

    run_ids: set[str] = field(default_factory=set)
    names: Counter = field(default_factory=Counter)
    #: each run's unregistered names and its recorded protocol and preset (``bench status``)
    by_run: dict[str, tuple[list[str], dict[str, str]]] = field(default_factory=dict)

    def text(self) -> str:
        """``2 runs of names no loaded plugin registers (dataset tiny: 2 runs, method mine:
        1 run)``."""
        each = ", ".join(
            f"{name}: {n} run{'s' * (n != 1)}" for name, n in sorted(self.names.items())
        )
        runs = len(self.run_ids)
        return f"{runs} run{'s' * (runs != 1)} of names no loaded plugin registers ({each})"

    @staticmethod
    def hint(command: str = "report") -> str:
        return (
            f"load the plugin that registers them: {PLUGINS_ENV}=my_module (or "
            f"path/to/plugin.py) bench {command} ... (docs/extending/index.md)"
        )


def foreign_runs(store: RunStore) -> ForeignRuns:
    found = ForeignRuns()
    for run_dir in store.runs():
        names, recorded = unregistered(run_dir)
        if names:
            found.run_ids.add(run_dir.run_id)
            found.names.update(names)
            found.by_run[run_dir.run_id] = (names, recorded)
    return found
