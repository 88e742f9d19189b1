"""`bench regress record | kernels | sweep | check`: catch a method getting worse on a small sweep.

    bench run --preset ci --protocol clean --methods all --datasets cmnist --ratios 5 \
        --seeds 0,1,2,3,4,5,6,7,8,9 --out BASE
    bench regress record --out BASE -o baseline.json   # once, and after a deliberate change
    ATEN_CPU_CAPABILITY=avx2 ... bench run ... --out BASE_AVX2   # the same sweep, other kernels
    bench regress kernels --out BASE_AVX2 --baseline baseline.json --name avx2
    bench regress sweep  --baseline baseline.json --out RUNS   # the seeds each cell needs
    bench regress check  --out RUNS --baseline baseline.json [--explain CELL]

A parser over :func:`debias_bench.session.regress.regress_check`: it prints one line per cell
(its verdict, the test accuracy's allowance and minimum detectable drop), one per metric that
moved, and a summary line with the minimum detectable drop per dataset; ``--explain CELL``
prints how that cell's allowances were computed instead. ``check`` exits 1 when a tracked
metric of a baseline cell dropped below the mean of the baseline's seeds (paired by seed: of
the new runs' own seeds) by more than its allowance or a cell is missing; it exits 2 (one
error line) for a baseline it cannot trust: malformed, without a count or a metric, or
recorded under another preset or protocol than the sweep's runs, or for an unknown
``--explain`` cell. ``kernels`` keeps the baseline's seeds as they ran under other kernels.
"""

from __future__ import annotations

import argparse
import statistics
import sys

from tabulate import tabulate

from debias_bench.analysis.check_design import TARGET
from debias_bench.analysis.regression import DEFAULT_NOISE_Z, DEFAULT_TOLERANCE
from debias_bench.commands.flags import number
from debias_bench.session.regress import (
    HEADLINES,
    CellCheck,
    MetricCheck,
    RegressCheck,
    regress_check,
    regress_kernels,
    regress_record,
)
from debias_bench.session.regress_sweep import regress_sweep

from .common import command_with_verbs, data_args, fmt, ints, printed
from .flags import execution_args, execution_of

ORDER = {"regressed": 0, "missing": 1, "improved": 2, "changed": 3, "new": 4, "ok": 5}


def _num(value: float | None, sign: bool = False) -> str:
    if value is None:
        return ""
    return f"{value:+.2f}" if sign else f"{value:.2f}"


def _status(status: str) -> str:
    return status.upper() if status in ("regressed", "missing") else status


def _head(head: MetricCheck | None) -> list[str]:
    if head is None:
        return [""] * 6
    return [
        head.metric.split(".")[0],
        fmt(head.baseline),
        fmt(head.current),
        _num(head.diff, True),
        _num(head.allowance),
        _num(head.mdd),
    ]


def cell_table(check: RegressCheck) -> str:
    """One line per cell: its verdict, its new runs and baseline seeds, and its headline's
    (the sharper of the last model's test accuracy and the learning curve's mean: ``last`` or
    ``curve``) baseline, new mean, difference, allowance and minimum detectable drop."""
    rows = [
        [_status(cell.verdict), cell.cell, f"{cell.runs}/{cell.seeds}", *_head(cell.headline)]
        for cell in sorted(check.cells, key=lambda c: (ORDER[c.verdict], c.cell))
    ]
    headers = [
        "verdict",
        "cell",
        "runs/seeds",
        "headline",
        "baseline",
        "now",
        "diff",
        "allowed",
        "mdd",
    ]
    return tabulate(rows, headers, tablefmt="github", disable_numparse=True)


def metric_table(check: RegressCheck, show_all: bool) -> str:
    """One line per metric that differs from its seed's recorded value (every one with
    ``show_all``), worst first."""
    rows: list[tuple[CellCheck, MetricCheck]] = sorted(
        ((cell, m) for cell in check.cells for m in cell.metrics if show_all or m.status != "ok"),
        key=lambda cm: (ORDER[cm[1].status], cm[0].cell, cm[1].metric),
    )
    table = [
        [
            _status(m.status),
            cell.cell,
            m.metric,
            fmt(m.baseline),
            _num(m.spread),
            fmt(m.current),
            _num(m.diff, True),
            _num(m.allowance),
            _num(m.mdd),
        ]
        for cell, m in rows
    ]
    headers = ["status", "cell", "metric", "baseline", "sd", "now", "diff", "allowed", "mdd"]
    return tabulate(table, headers, tablefmt="github", disable_numparse=True) if table else ""


def mdd_line(check: RegressCheck) -> str:
    """The minimum detectable drop of each cell's headline per dataset: median (range)."""
    parts = []
    for dataset, values in sorted(check.mdd_by_dataset().items()):
        low, high = min(values), max(values)
        span = f" ({low:.1f}-{high:.1f})" if high - low >= 0.05 else ""
        parts.append(f"{dataset} {statistics.median(values):.1f}{span}")
    if not parts:
        return ""
    return (
        f"; minimum detectable drop at {check.power * 100:g} % power (the sharper of "
        f"{' and '.join(HEADLINES)} per cell, median (range) over cells, points): "
        + ", ".join(parts)
    )


def render(check: RegressCheck, show_all: bool = False) -> str:
    """The per-cell table, the per-metric differences, a summary line and the notes."""
    lines = [cell_table(check)]
    metrics = metric_table(check, show_all)
    if metrics:
        lines += ["", metrics]
    checked = sum(c.verdict != "new" for c in check.cells)
    counts = ", ".join(
        f"{check.count(s)} {s}" for s in ("regressed", "missing", "improved", "changed", "new")
    )
    low, high = check.seeds
    seeds = f"{low}" if low == high else f"{low}-{high}"
    lines.append(
        f"{checked} baseline cells of {seeds} seed(s), tolerance {check.tolerance:g} "
        f"points or {check.noise_z:g} standard deviations of each metric's spread over "
        f"the seeds and test images: {counts}{mdd_line(check)}"
    )
    lines += [f"note: {note}" for note in check.notes]
    if check.count("improved"):
        lines.append("note: improvements pass; record the baseline again to lock them in")
    return "\n".join(lines)


def cmd_record(args: argparse.Namespace) -> int:
    done = regress_record(args.out, args.output, allow_unfinished=args.allow_unfinished)
    print(
        f"wrote {args.output}: {done.cells} cells of "
        f"{'-'.join(map(str, done.seeds))} seed(s) from {args.out}",
        file=sys.stderr,
    )
    return 0


def checked(args: argparse.Namespace, explain: str | None = None, show_all: bool = False) -> int:
    """Check ``args.out`` against ``args.baseline`` with ``args``' allowance flags: print the
    tables (or how the ``explain`` cell's allowances were computed); the exit code."""
    check = regress_check(args.out, args.baseline, tolerance=args.tolerance, noise_z=args.noise_z)
    if explain:
        print(check.explain(explain))
        return 1 if check.cell(explain).verdict in ("regressed", "missing") else 0
    print(render(check, show_all=show_all))
    if check.failed:
        print(
            f"regression: {len(check.failed)} cell(s) worse than {args.baseline} allows",
            file=sys.stderr,
        )
    return check.exit_code


def cmd_check(args: argparse.Namespace) -> int:
    return checked(args, args.explain, args.all)


def cmd_sweep(args: argparse.Namespace) -> int:
    done = regress_sweep(
        args.baseline,
        args.out,
        execution_of(args),
        datasets=args.datasets.split(",") if args.datasets else None,
        seeds=ints(args.seeds) if args.seeds else None,
        dry_run=args.dry_run,
    )
    if args.dry_run:
        return 0
    code = printed(done)
    if not args.check or done.signal is not None or done.detached:
        return code  # stopped: the runs are not all there to check
    return checked(args)  # a failed run is a missing cell there: the check names it


def cmd_kernels(args: argparse.Namespace) -> int:
    kept = regress_kernels(args.out, args.baseline, args.name)
    print(
        f"kept {kept} run(s) of {args.out} in {args.baseline} as kernels {args.name!r}",
        file=sys.stderr,
    )
    return 0


def allowance_args(parser: argparse.ArgumentParser) -> None:
    """The flags of a check's allowance (``check``, and ``sweep --check``)."""
    parser.add_argument(
        "--tolerance",
        type=number("float", 0, 100),
        default=DEFAULT_TOLERANCE,
        help="allowed drop in accuracy points, at least (default %(default)s)",
    )
    parser.add_argument(
        "--noise-z",
        type=number("float", 0, 100),
        default=DEFAULT_NOISE_Z,
        help="or this many standard deviations of the metric's spread over the baseline's "
        "seeds and its test images, if larger (default %(default)s; 0: the tolerance only)",
    )


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

    sweep = verbs.add_parser(
        "sweep",
        help="train the runs a check compares with the baseline: its preset, protocol and "
        "ratios, every method, the seeds each cell needs",
    )
    sweep.add_argument("--baseline", required=True, help="baseline JSON (bench regress record)")
    sweep.add_argument("--out", required=True, help="run store to train into")
    sweep.add_argument(
        "--datasets", help="comma list of the baseline's datasets (default: all it holds)"
    )
    sweep.add_argument(
        "--seeds",
        help="these seeds for every cell (default: Colored MNIST's cells the fewest seeds that "
        f"bring their allowance under {TARGET:g} points, the image sets' seed 0)",
    )
    sweep.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    data_args(sweep)
    sweep.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    sweep.add_argument(
        "--check",
        action="store_true",
        help="then check the runs against the baseline, as bench regress check does (in this "
        "process: no second start-up)",
    )
    allowance_args(sweep)
    execution_args(sweep)
    sweep.set_defaults(func=cmd_sweep)

    kern = verbs.add_parser(
        "kernels",
        help="keep the baseline's seeds as they ran under other SIMD kernels, beside it",
    )
    kern.add_argument(
        "--out", required=True, help="run store of the baseline's sweep under other kernels"
    )
    kern.add_argument("--baseline", required=True, help="baseline JSON to add them to")
    kern.add_argument(
        "--name", required=True, help="the kernel setting, e.g. avx2 (ATEN_CPU_CAPABILITY)"
    )
    kern.set_defaults(func=cmd_kernels)

    check = verbs.add_parser("check", help="compare a sweep with a baseline (exit 1 if worse)")
    check.add_argument("--out", required=True, help="run store of the new sweep")
    check.add_argument("--baseline", required=True, help="baseline JSON (bench regress record)")
    allowance_args(check)
    check.add_argument("--all", action="store_true", help="list unchanged metrics too")
    check.add_argument(
        "--explain",
        metavar="CELL",
        help="show how each allowance of CELL (e.g. cmnist/vanilla/r5/clean) was computed "
        "from the baseline's seeds, the new runs and the test images, instead of the tables",
    )
    check.set_defaults(func=cmd_check)
