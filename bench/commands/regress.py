"""`bench regress record | check`: catch a method getting worse on a small fixed sweep.

    bench run --preset ci --methods all --datasets cmnist --seeds 0,1,2,3,4 --out BASE
    bench regress record --out BASE -o baseline.json   # once, and after a deliberate change
    bench run --preset ci --methods all --datasets cmnist --seeds 0 --out RUNS
    bench regress check  --out RUNS --baseline baseline.json [--tolerance 1.0] [--noise-z 3]

``check`` exits 1 when a tracked metric of a baseline cell dropped below the mean of the
baseline's seeds by more than its allowance (the seeds' spread and the test-set noise, see
:mod:`debias_bench.analysis.regression`) or a cell is missing, and prints the differences; it
exits 2 (one error line) for a baseline it cannot trust: malformed, without a count or a
metric, or recorded under another preset or protocol than the sweep's runs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from tabulate import tabulate

from debias_bench.analysis.regression import (
    DEFAULT_NOISE_Z,
    DEFAULT_TOLERANCE,
    Comparison,
    Difference,
    compare,
    load_baseline,
    record,
    save_baseline,
    sweep_cells,
)
from debias_bench.commands.flags import number

from .common import command_with_verbs, fmt


def _spread(d: Difference) -> str:
    return "" if d.spread is None else f"{d.spread:.2f}"


def render(comparison: Comparison, show_all: bool = False) -> str:
    """The table of differences (every row with ``show_all``) and a summary line."""
    order = {"regressed": 0, "missing": 1, "improved": 2, "changed": 3, "new": 4, "ok": 5}
    rows = sorted(
        (d for d in comparison.differences if show_all or d.status != "ok"),
        key=lambda d: (order[d.status], d.cell, d.metric),
    )
    table = [
        [
            d.status.upper() if d.status in ("regressed", "missing") else d.status,
            d.cell,
            d.metric,
            fmt(d.baseline),
            _spread(d),
            fmt(d.current),
            "" if d.diff is None else f"{d.diff:+.2f}",
            "" if d.allowed is None else f"{d.allowed:.2f}",
        ]
        for d in rows
    ]
    headers = ["status", "cell", "metric", "baseline", "sd", "now", "diff", "allowed"]
    lines = [tabulate(table, headers, tablefmt="github", disable_numparse=True)] if table else []
    cells = {d.cell for d in comparison.differences if d.status != "new"}
    counts = ", ".join(
        f"{comparison.count(s)} {s}" for s in ("regressed", "missing", "improved", "changed", "new")
    )
    low, high = comparison.seeds or (0, 0)
    seeds = f"{low}" if low == high else f"{low}-{high}"
    lines.append(
        f"{len(cells)} baseline cells of {seeds} seed(s), tolerance {comparison.tolerance:g} "
        f"points or {comparison.noise_z:g} standard deviations of each metric's spread over "
        f"the seeds and test images: {counts}"
    )
    lines += [f"note: {note}" for note in comparison.notes]
    if comparison.count("improved"):
        lines.append("note: improvements pass; record the baseline again to lock them in")
    return "\n".join(lines)


def cmd_record(args: argparse.Namespace) -> int:
    baseline = record(Path(args.out), allow_unfinished=args.allow_unfinished)
    save_baseline(baseline, Path(args.output))
    seeds = sorted({len(cell["seeds"]) for cell in baseline["cells"].values()})
    print(
        f"wrote {args.output}: {len(baseline['cells'])} cells of "
        f"{'-'.join(map(str, seeds))} seed(s) from {args.out}",
        file=sys.stderr,
    )
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    baseline = load_baseline(Path(args.baseline))
    cells, unfinished = sweep_cells(Path(args.out))
    comparison = compare(
        baseline, cells, args.tolerance, unfinished, args.noise_z, args.baseline, args.out
    )
    print(render(comparison, show_all=args.all))
    if comparison.failed:
        print(
            f"regression: {len(comparison.failed)} metric(s) or cell(s) worse than "
            f"{args.baseline} allows",
            file=sys.stderr,
        )
        return 1
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    verbs = command_with_verbs(
        sub, "regress", "record a sweep's metrics as a baseline, or check a sweep against one"
    )

    rec = verbs.add_parser("record", help="store the metrics of a finished sweep as a baseline")
    rec.add_argument("--out", required=True, help="run store of the finished sweep")
    rec.add_argument("-o", "--output", required=True, help="baseline JSON to write")
    rec.add_argument(
        "--allow-unfinished", action="store_true", help="record the finished runs only"
    )
    rec.set_defaults(func=cmd_record)

    check = verbs.add_parser("check", help="compare a sweep with a baseline (exit 1 if worse)")
    check.add_argument("--out", required=True, help="run store of the new sweep")
    check.add_argument("--baseline", required=True, help="baseline JSON (bench regress record)")
    check.add_argument(
        "--tolerance",
        type=number("float", 0, 100),
        default=DEFAULT_TOLERANCE,
        help="allowed drop in accuracy points, at least (default %(default)s)",
    )
    check.add_argument(
        "--noise-z",
        type=number("float", 0, 100),
        default=DEFAULT_NOISE_Z,
        help="or this many standard deviations of the metric's spread over the baseline's "
        "seeds and its test images, if larger (default %(default)s; 0: the tolerance only)",
    )
    check.add_argument("--all", action="store_true", help="list unchanged metrics too")
    check.set_defaults(func=cmd_check)
