"""docs/regression.md's table of the check paired by seed (issue 50): false alarms and power.

The committed record's Colored MNIST cells hold 20 seeds and, for each, the value the same
run gave under the ``avx2`` and the ``default`` kernels (``bench regress kernels``). Each row
checks pairs of seeds with the project's own :func:`~debias_bench.analysis.regression.compare`
against a baseline built so that the checked runs never taught it their own kernels' moves:

- **other setting**: the baseline keeps one setting's pairs; the other setting's runs are
  checked, seeds 0-1, 2-3, ..., 18-19 (the pairs never saw that setting);
- **seeds left out**: the baseline keeps both settings' pairs but those of the checked seeds;
  each setting's runs of those seeds are checked;
- **fresh seeds**: seeds 20-23 under ``avx2`` against a baseline that holds their values on
  this machine (appended to the 20) and the 20 seeds' pairs only.

"+4 caught" checks the check's own runs (seeds 0-1 on this machine's kernels) and the ``avx2``
runs of seeds 0-1 (against the ``default`` pairs only) against the baseline with every value
raised by 4 points (at most 100). Also printed: the largest drop of any metric in the check's
standard deviations (``(reference - mean) / sigma``), over the false-alarm rows.

    python scripts/regress_pairs_table.py OWN FRESH AVX2_FRESH

OWN: the check's runs (seeds 0-1); FRESH: seeds 20-29 on this machine's kernels; AVX2_FRESH:
seeds 20-23 under AVX2 (each made as scripts/ci_regress.sh makes Colored MNIST's runs).
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from typing import Any

from debias_bench.analysis.baseline import sweep_cells
from debias_bench.analysis.regression import compare

RECORD = Path(__file__).resolve().parents[1] / "tests" / "baselines" / "ci_preset.json"
Cell = dict[str, Any]


def subset(cell: Cell, seeds: list[int]) -> Cell:
    """``cell`` with the values of ``seeds`` only (in that order)."""
    at = [cell["seeds"].index(s) for s in seeds]
    out = {k: v for k, v in cell.items() if k not in ("kernels", "metrics", "run_ids")}
    out["seeds"] = list(seeds)
    out["run_ids"] = [cell["run_ids"][i] for i in at]
    out["metrics"] = {m: [v[i] for i in at] for m, v in cell["metrics"].items()}
    return out


def kernel_cell(cell: Cell, name: str) -> Cell:
    """The runs of ``cell``'s seeds under the kernel setting ``name``, as a check's cell."""
    setting = cell["kernels"][name]
    out = subset(cell, setting["seeds"])
    out["metrics"] = dict(setting["metrics"])
    return out


def keep_kernels(cell: Cell, names: tuple[str, ...], without: tuple[int, ...] = ()) -> Cell:
    """``cell`` with the kernel settings ``names`` only, the seeds ``without`` left out."""
    out = copy.deepcopy(cell)
    kept = {}
    for name in names:
        part = subset(kernel_cell(cell, name), [s for s in SEEDS if s not in without])
        kept[name] = {"seeds": part["seeds"], "metrics": part["metrics"]}
    out["kernels"] = kept
    return out


def raised(cell: Cell, points: float) -> Cell:
    out = copy.deepcopy(cell)
    up = lambda vs: [min(100.0, v + points) for v in vs]  # noqa: E731
    out["metrics"] = {m: up(v) for m, v in out["metrics"].items()}
    for setting in out.get("kernels", {}).values():
        setting["metrics"] = {m: up(v) for m, v in setting["metrics"].items()}
    return out


def check(base: Cell, new: Cell) -> tuple[bool, float]:
    """(whether the cell fails, the largest drop of a metric in the check's sigmas)."""
    key = "cmnist/x"
    comparison = compare({"format": 2, "cells": {key: base}}, {key: new})
    worst = max(
        (d.rule.reference - d.current) / d.rule.sigma
        for d in comparison.differences
        if d.rule is not None and d.current is not None
    )
    return bool(comparison.failed), worst


SEEDS = list(range(20))
PAIRS = [(i, i + 1) for i in range(0, 20, 2)]


def main(own: str, fresh: str, avx2_fresh: str) -> None:
    record = json.loads(RECORD.read_text())["cells"]
    cells = {k: c for k, c in record.items() if c["dataset"] == "cmnist"}
    ours, _ = sweep_cells(Path(own))
    new_f, _ = sweep_cells(Path(fresh))
    new_af, _ = sweep_cells(Path(avx2_fresh))
    rows: dict[str, list[tuple[bool, float]]] = {}
    for key, cell in cells.items():
        for held, kept in (("default", ("avx2",)), ("avx2", ("default",))):
            base = keep_kernels(cell, kept)
            for pair in PAIRS:
                new = subset(kernel_cell(cell, held), list(pair))
                rows.setdefault(f"other setting: {held} runs, {kept[0]} pairs", []).append(
                    check(base, new)
                )
        for pair in PAIRS:
            base = keep_kernels(cell, ("avx2", "default"), without=pair)
            for held in ("avx2", "default"):
                new = subset(kernel_cell(cell, held), list(pair))
                rows.setdefault("seeds left out: both settings", []).append(check(base, new))
        fresh_seeds = [20, 21, 22, 23]
        base = keep_kernels(cell, ("avx2", "default"))
        native = subset(new_f[key], fresh_seeds)
        base["seeds"] += fresh_seeds
        base["run_ids"] += native["run_ids"]
        base["metrics"] = {m: v + native["metrics"][m] for m, v in base["metrics"].items()}
        for pair in ((20, 21), (22, 23)):
            rows.setdefault("fresh seeds 20-23 under avx2", []).append(
                check(base, subset(new_af[key], list(pair)))
            )
    print("| checked | alarms | largest drop (sigmas) |")
    print("|---|---|---|")
    for name, found in rows.items():
        alarms = sum(failed for failed, _ in found)
        print(f"| {name} | {alarms} of {len(found)} | {max(w for _, w in found):.2f} |")
    print()
    print("| +4 points | cells caught (of 14) | which not |")
    print("|---|---|---|")
    for name, runs, kept in (
        ("the check's seeds 0-1, this machine's kernels", None, ("avx2", "default")),
        ("seeds 0-1 under avx2, default pairs only", "avx2", ("default",)),
    ):
        missed = []
        for key, cell in cells.items():
            new = subset(ours[key], [0, 1]) if runs is None else subset(kernel_cell(cell, runs), [0, 1])
            failed, _ = check(raised(keep_kernels(cell, kept), 4.0), new)
            if not failed:
                missed.append(cell["method"])
        print(f"| {name} | {14 - len(missed)} | {', '.join(sorted(missed))} |")


if __name__ == "__main__":
    main(*sys.argv[1:4])
