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


def test_the_run_ids_of_the_built_in_grid_do_not_move() -> None:
    golden = GOLDEN.read_text().splitlines()
    now = grid_ids()
    moved = [f"{g}  ->  {n.split()[-1]}" for g, n in zip(golden, now, strict=False) if g != n]
    assert not moved and len(now) == len(golden), (
        f"{len(moved)} of {len(golden)} run ids moved (first: {moved[:5]}); "
        f"{len(now)} cells now, {len(golden)} in {GOLDEN.name}"
    )


if __name__ == "__main__":
    print("\n".join(grid_ids()))
