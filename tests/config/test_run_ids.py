"""Run ids are a promise: a store written today is found by the same ids tomorrow.

``golden/run_ids.txt`` holds the id of every run of the built-in grid (every preset, protocol,
method, dataset, the ratios 0.5/1/2/5 and seeds 0-2; ``ERR <error>`` where the combination is
refused). A change that moves any id fails here, naming the first ones that moved; a change
that must move ids (a method trained differently) regenerates the file with
``python tests/config/test_run_ids.py > tests/golden/run_ids.txt`` and says why in its commit."""

from __future__ import annotations

from pathlib import Path

from debias_bench.config.run_config import PRESETS, PROTOCOLS, make_config
from debias_bench.errors import BenchError
from debias_bench.registry import DATASETS, METHODS

GOLDEN = Path(__file__).parents[1] / "golden" / "run_ids.txt"
RATIOS = (0.5, 1, 2, 5)


def built_in(registry, package: str) -> list[str]:
    """The registry's names that ship with bench (tests and plugins register others)."""
    return sorted(e.name for e in registry if e.obj.__module__.startswith(package))


def grid_ids() -> list[str]:
    lines = []
    methods = built_in(METHODS, "debias_bench.methods.")
    datasets = built_in(DATASETS, "debias_bench.datasets.")
    for preset in sorted(PRESETS):
        for protocol in sorted(PROTOCOLS):
            for method in methods:
                for dataset in datasets:
                    for ratio in RATIOS:
                        for seed in range(3):
                            cell = f"{preset} {protocol} {method} {dataset} {ratio} {seed}"
                            try:
                                config = make_config(
                                    method, dataset, ratio, seed, protocol=protocol, preset=preset
                                )
                                lines.append(f"{cell} {config.run_id}")
                            except BenchError as exc:
                                lines.append(f"{cell} ERR {type(exc).__name__}")
    return lines


def _by_cell(lines: list[str]) -> dict[str, str]:
    """``"preset protocol method dataset ratio seed"`` -> its run id (or ``ERR ...``)."""
    return {" ".join(line.split()[:6]): " ".join(line.split()[6:]) for line in lines}


def test_the_run_ids_of_the_built_in_grid_do_not_move() -> None:
    """Every cell of the recorded grid keeps its id; a cell new to the grid (a new dataset or
    method) must be recorded too (``python tests/config/test_run_ids.py > GOLDEN``)."""
    golden, now = _by_cell(GOLDEN.read_text().splitlines()), _by_cell(grid_ids())
    moved = [
        f"{c} {golden[c]}  ->  {now.get(c, 'gone')}" for c in golden if now.get(c) != golden[c]
    ]
    added = sorted(set(now) - set(golden))
    assert not moved and not added, (
        f"{len(moved)} of {len(golden)} run ids moved (first: {moved[:5]}); "
        f"{len(added)} cells not in {GOLDEN.name} (first: {added[:3]})"
    )


if __name__ == "__main__":
    print("\n".join(grid_ids()))
