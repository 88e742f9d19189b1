"""docs/regression.md's table of the check paired by seed (issue 50): false alarms and power.

The committed record's Colored MNIST cells hold 20 seeds and, for each, the value the same
run gave under the ``avx2`` and the ``default`` kernels (``bench regress kernels``). Each row
checks groups of ``M`` seeds (the check's own ``M`` for the cell,
:func:`~debias_bench.analysis.check_design.check_runs`) with the project's own
:func:`~debias_bench.analysis.regression.compare`, against a baseline built so that the checked
runs never taught it their own kernels' moves:

- **other setting**: the baseline keeps one setting's pairs; the other setting's runs are
  checked, seeds 0..M-1, M..2M-1, ... (the pairs never saw that setting);
- **seeds left out**: the baseline keeps both settings' pairs but those of the checked seeds;
  each setting's runs of those seeds are checked;
- **fresh seeds**: seeds 20-23 under ``avx2`` against a baseline that holds their values on
  this machine (appended to the 20) and the 20 seeds' pairs only.

"+4 caught" checks seeds 0..M-1 as this machine runs them (the record's own values: the check
reproduces them bit for bit here) and as ``avx2`` runs them (against the ``default`` pairs
only), against the baseline with every value raised by 4 points (at most 100). Also printed:
the largest drop of any metric in the check's standard deviations (``(reference - mean) /
sigma``), over each false-alarm row.

    python scripts/regress_pairs_table.py FRESH AVX2_FRESH
    python scripts/regress_pairs_table.py --cells     # the per-cell and per-dataset tables
    python scripts/regress_pairs_table.py --targets   # what each target of the design buys

FRESH: seeds 20-23 on this machine's kernels; AVX2_FRESH: the same under AVX2 (each made as
scripts/ci_regress.sh makes Colored MNIST's runs). A third setting was tried,
``ATEN_CPU_CAPABILITY=default`` alone (MKL and oneDNN at their own): its 280 runs gave the
``default`` setting's numbers bit for bit (these runs move with PyTorch's own kernels only), so
it is no further test.
"""

from __future__ import annotations

import copy
import json
import sys
from pathlib import Path
from statistics import median
from typing import Any

from debias_bench.analysis.baseline import sweep_cells
from debias_bench.analysis.check_design import HEADLINES, TARGET, check_runs, headline_rule
from debias_bench.analysis.regress_rule import Allowance
from debias_bench.analysis.regression import compare, kernel_diffs
from debias_bench.registry import DATASETS, METHODS
from debias_bench.session.regress_sweep import check_seeds

RECORD = Path(__file__).resolve().parents[1] / "tests" / "baselines" / "ci_preset.json"
Cell = dict[str, Any]
#: a check's verdict: (whether the cell fails, the largest drop of a metric in sigmas)
Verdict = tuple[bool, float]


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


def check(base: Cell, new: Cell) -> Verdict:
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


def groups(m: int, seeds: list[int] = SEEDS) -> list[list[int]]:
    """``seeds`` in consecutive groups of ``m`` (a last short group left out)."""
    return [seeds[i : i + m] for i in range(0, len(seeds) - m + 1, m)]


def rms(values: tuple[float, ...]) -> float:
    return (sum(v * v for v in values) / len(values)) ** 0.5


def per_cell(cells: dict[str, Cell], more: dict[str, int]) -> None:
    """Each cell's two headlines (the last model's test accuracy, the learning curve's mean):
    the seeds' spread, each setting's tau and the allowance at the check's M (marked
    "(seeds)" where the rule does not pair by seed); the sharper headline and its MDD.
    docs/regression.md holds these rows ("The learning curve's mean"; a test checks them)."""
    print(
        "| method | M | last: s, tau avx2 / default, allowance "
        "| curve: s, tau avx2 / default, allowance | headline | MDD |"
    )
    print("|---|---|---|---|---|---|")
    for cell in sorted(cells.values(), key=lambda c: c["method"]):
        m = more.get(cell["method"], 2)
        parts, rules = [], {}
        for metric in HEADLINES:
            values, diffs = cell["metrics"][metric], kernel_diffs(cell, metric)
            rule = Allowance(
                tuple(values), m, cell["counts"][metric], kernels=diffs, own=tuple(values[:m])
            )
            rules[metric] = rule
            taus = " / ".join(f"{rms(d):.2f}" for d in diffs)
            design = "" if rule.paired else " (seeds)"
            parts.append(f"{rule.spread:.2f}, {taus}, {rule.allowed:.2f}{design}")
        best = min(rules, key=lambda k: rules[k].allowed)
        name = METHODS.entry(cell["method"]).display_name
        head = best.split(".")[0]
        print(f"| {name} | {m} | {' | '.join(parts)} | {head} | {rules[best].mdd:.2f} |")
    print()


#: the datasets of the committed record, in the docs' order
DATASETS_SHOWN = ("cmnist", "cifar10c", "dogs_and_cats", "bar")


def by_dataset(record: dict[str, Any]) -> None:
    """Per dataset: the headline allowance and MDD of its cells at the runs the check trains
    (``check_runs`` on Colored MNIST, one seed on the image sets, as ``bench regress sweep``).
    docs/regression.md holds these rows ("This project's own baseline"; a test checks them)."""
    print(
        "| dataset | cells | runs per cell | allowance, median (range) "
        f"| under {TARGET:g} (the target) | MDD, median |"
    )
    print("|---|---|---|---|---|---|")
    for dataset in DATASETS_SHOWN:
        name = DATASETS.entry(dataset).display_name
        cells = [c for c in record["cells"].values() if c["dataset"] == dataset]
        plan = check_seeds(record, dataset, [c["method"] for c in cells])
        rules = [headline_rule(c, len(plan[c["method"]])) for c in cells]
        allowed = [r.allowed for r in rules]
        runs = sorted({len(seeds) for seeds in plan.values()})
        span = f"{runs[0]}" if len(runs) == 1 else f"{runs[0]}-{runs[-1]}"
        print(
            f"| {name} | {len(cells)} | {span} | "
            f"{median(allowed):.1f} ({min(allowed):.1f}-{max(allowed):.1f}) | "
            f"{sum(a < TARGET for a in allowed)} | {median(r.mdd for r in rules):.1f} |"
        )
    print()


def cells_only() -> None:
    """The two tables that read the committed record alone."""
    record = json.loads(RECORD.read_text())
    cells = {k: c for k, c in record["cells"].items() if c["dataset"] == "cmnist"}
    per_cell(cells, check_runs(record, "cmnist", [c["method"] for c in cells.values()], 2))
    by_dataset(record)


def other_kernels(cells: dict[str, Cell], more: dict[str, int]) -> dict[str, list[Verdict]]:
    """The false-alarm rows the record alone gives: each setting's runs against the other
    setting's pairs only, and seeds left out of both settings' pairs."""
    rows: dict[str, list[Verdict]] = {}
    for cell in cells.values():
        m = more.get(cell["method"], 2)
        for held, kept in (("default", ("avx2",)), ("avx2", ("default",))):
            base = keep_kernels(cell, kept)
            for seeds in groups(m):
                new = subset(kernel_cell(cell, held), seeds)
                name = f"other setting: {held} runs, {kept[0]} pairs only"
                rows.setdefault(name, []).append(check(base, new))
        for seeds in groups(m):
            base = keep_kernels(cell, ("avx2", "default"), without=tuple(seeds))
            for held in ("avx2", "default"):
                new = subset(kernel_cell(cell, held), seeds)
                rows.setdefault("seeds left out: both settings", []).append(check(base, new))
    return rows


#: the two ways the +4 raise is checked: (name, the runs' kernels (None: this machine's), the
#: kernel pairs the raised baseline keeps)
RAISED = (
    ("this machine's kernels, both settings' pairs", None, ("avx2", "default")),
    ("under avx2, default pairs only", "avx2", ("default",)),
)


def missed_at_plus_4(cells: dict[str, Cell], more: dict[str, int], runs: str | None,
                     kept: tuple[str, ...]) -> list[str]:  # fmt: skip
    """The methods whose check (seeds 0..M-1, ``runs``' kernels) passes against the baseline
    raised by 4 points (keeping the ``kept`` pairs)."""
    missed = []
    for cell in cells.values():
        seeds = list(range(more.get(cell["method"], 2)))
        new = subset(cell if runs is None else kernel_cell(cell, runs), seeds)
        failed, _ = check(raised(keep_kernels(cell, kept), 4.0), new)
        if not failed:
            missed.append(cell["method"])
    return sorted(missed)


def main(fresh: str, avx2_fresh: str) -> None:
    record = json.loads(RECORD.read_text())
    cells = {k: c for k, c in record["cells"].items() if c["dataset"] == "cmnist"}
    more = check_runs(record, "cmnist", [c["method"] for c in cells.values()], 2)
    per_cell(cells, more)
    new_f, _ = sweep_cells(Path(fresh))
    new_af, _ = sweep_cells(Path(avx2_fresh))
    rows = other_kernels(cells, more)
    for key, cell in cells.items():
        m = more.get(cell["method"], 2)
        fresh_seeds = [20, 21, 22, 23]
        base = keep_kernels(cell, ("avx2", "default"))
        native = subset(new_f[key], fresh_seeds)
        base["seeds"] += fresh_seeds
        base["run_ids"] += native["run_ids"]
        base["metrics"] = {m_: v + native["metrics"][m_] for m_, v in base["metrics"].items()}
        for seeds in groups(m, fresh_seeds):
            rows.setdefault("fresh seeds 20-23 under avx2", []).append(
                check(base, subset(new_af[key], seeds))
            )
    print("| checked (groups of the cell's M seeds) | alarms | largest drop (sigmas) |")
    print("|---|---|---|")
    for name, found in rows.items():
        alarms = sum(failed for failed, _ in found)
        print(f"| {name} | {alarms} of {len(found)} | {max(w for _, w in found):.2f} |")
    print()
    print("| +4 points, the check's seeds 0..M-1 | cells caught (of 14) | not caught |")
    print("|---|---|---|")
    for name, runs, kept in RAISED:
        missed = missed_at_plus_4(cells, more, runs, kept)
        print(f"| {name} | {len(cells) - len(missed)} | {', '.join(missed)} |")


#: the targets docs/regression.md's "What the target buys" compares
TARGETS = (3.5, 3.6, 3.75, 4.0)


def targets() -> None:
    """Per target of the design: the Colored MNIST runs it trains (those of the cells above
    one run), the +4 raise caught both ways, and the false alarms from the record (each cell
    checked once per number of runs the targets give it)."""
    record = json.loads(RECORD.read_text())
    cells = {k: c for k, c in record["cells"].items() if c["dataset"] == "cmnist"}
    names = {c["method"]: METHODS.entry(c["method"]).display_name for c in cells.values()}
    print(
        "| target | runs | cells over 1 run | +4 caught (this machine; avx2) "
        "| alarms: other setting | alarms: seeds left out | headline allowance over 3.5 |"
    )
    print("|---|---|---|---|---|---|---|")
    seen: dict[tuple[str, int], tuple[dict[str, list[Verdict]], list[list[str]]]] = {}
    for target in TARGETS:
        more = check_runs(record, "cmnist", [c["method"] for c in cells.values()], 2, target)
        rows: dict[str, list[Verdict]] = {}
        missed: list[list[str]] = [[] for _ in RAISED]
        for key, cell in cells.items():
            one = {key: cell}
            m = {cell["method"]: more[cell["method"]]}
            if (key, m[cell["method"]]) not in seen:
                ways = [missed_at_plus_4(one, m, runs, kept) for _, runs, kept in RAISED]
                seen[key, m[cell["method"]]] = (other_kernels(one, m), ways)
            alarms, ways = seen[key, m[cell["method"]]]
            for name, found in alarms.items():
                rows.setdefault(name, []).extend(found)
            for way, methods in zip(missed, ways, strict=True):
                way.extend(methods)
        several = ", ".join(f"{names[m]} {n}" for m, n in sorted(more.items()) if n > 1)
        caught = "; ".join(str(len(cells) - len(way)) for way in missed)
        other = [f for k, v in rows.items() if k.startswith("other") for f, _ in v]
        left = [f for f, _ in rows["seeds left out: both settings"]]
        over = [
            f"{names[c['method']]} {rule.allowed:.2f}"
            for c in sorted(cells.values(), key=lambda c: c["method"])
            if (rule := headline_rule(c, more[c["method"]])).allowed >= 3.5
        ]
        print(
            f"| {target:g} | {sum(more.values())} | {several} | {caught} "
            f"| {sum(other)} of {len(other)} | {sum(left)} of {len(left)} | {', '.join(over)} |"
        )


if __name__ == "__main__":
    if sys.argv[1:] == ["--cells"]:
        cells_only()
    elif sys.argv[1:] == ["--targets"]:
        targets()
    else:
        main(*sys.argv[1:3])
