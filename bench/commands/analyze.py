"""`bench analyze nc`, `ablation`, `tune` and `amp`.

`nc`: Figure-2-style curves of accuracy and Neural Collapse over training.

Panels: (a) test accuracy of bias-aligned and bias-conflicting samples, (b-d) NC1, NC2, NC3 on
bias-aligned and bias-conflicting training features; one colour per run (method), solid lines
for aligned, dashed for conflicting. Runs must have been trained with ``--set track_nc=true``.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from debias_bench.analysis import amp_parity
from debias_bench.analysis.ablations import ABLATIONS, ablation_frame, get_ablation, plot_ablation
from debias_bench.analysis.tuning import TUNED_FILE, read_tuned
from debias_bench.analysis.tuning_plot import plot_tuning
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import BenchError
from debias_bench.reporting.figures import save_png_pdf
from debias_bench.reporting.records import METRICS
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.store import RunStore
from debias_bench.session.results import results

from .common import command_with_verbs

PANELS = (
    ("accuracy", "test accuracy (%)"),
    ("nc1", "NC1"),
    ("nc2", "NC2"),
    ("nc3", "NC3"),
)


def _select_runs(args: argparse.Namespace) -> list[RunDir]:
    runs = [RunDir(Path(p)) for p in args.runs]
    if args.out:
        runs += list(RunStore(Path(args.out)).readable_runs())
    chosen = []
    for run in runs:
        config = run.config()
        if args.dataset and config.get("dataset") != args.dataset:
            continue
        if args.ratio is not None and float(config.get("ratio", -1)) != args.ratio:
            continue
        if args.methods and config.get("method") not in args.methods.split(","):
            continue
        chosen.append(run)
    if not chosen:
        raise BenchError("no runs match", hint="give run directories or --out with filters")
    return chosen


#: what a record must hold to be drawn: (test accuracy key, NC group) per group
_GROUPS = (("aligned", "aligned_accuracy"), ("conflicting", "conflicting_accuracy"))


def _nc_point(record: dict[str, Any]) -> dict[Any, float] | None:
    """One evaluation's values for the curves; None when the record lacks any of them."""
    try:
        point: dict[Any, float] = {"epoch": float(record["epoch"])}
        for group, acc_key in _GROUPS:
            point[("accuracy", group)] = float(record["test"][acc_key])
            for metric in ("nc1", "nc2", "nc3"):
                point[(metric, group)] = float(record["nc"][group][metric])
    except (KeyError, TypeError, ValueError):
        return None
    return point


def _curves(run: RunDir) -> dict[str, Any]:
    points = [p for p in map(_nc_point, run.metrics()) if p is not None]
    if not points:
        raise BenchError(
            f"{run.path} has no Neural Collapse records",
            hint="train it with `--set track_nc=true`",
        )
    return {key: [p[key] for p in points] for key in points[0]}


def plot_nc(runs: list[RunDir], output: Path) -> list[Path]:
    """Write ``output`` as PNG and PDF; returns the files written."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 4, figsize=(18, 4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, run in enumerate(runs):
        config, curves = run.config(), _curves(run)
        label = f"{config['method']} (s{config['seed']})"
        for ax, (metric, title) in zip(axes, PANELS, strict=True):
            for group, style in (("aligned", "-"), ("conflicting", "--")):
                ax.plot(
                    curves["epoch"],
                    curves[(metric, group)],  # type: ignore[index]
                    style,
                    color=colours[i % len(colours)],
                    label=f"{label}-{group.capitalize()}",
                )
            ax.set_title(title)
            ax.set_xlabel("epoch")
            if metric != "accuracy":
                ax.set_yscale("log")
    first = runs[0].config()
    fig.suptitle(
        f"{first['dataset']} at {first['ratio']:g}% bias-conflicting "
        f"(protocol {first.get('protocol')})"
    )
    axes[-1].legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    return save_png_pdf(fig, output)


def cmd_analyze(args: argparse.Namespace) -> int:
    for path in plot_nc(_select_runs(args), Path(args.output)):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_ablation(args: argparse.Namespace) -> int:
    ablation = get_ablation(args.name)
    frame = ablation_frame(RunStore(Path(args.out)), ablation, args.selection)
    if frame.empty:
        raise BenchError(
            f"no finished runs of the {args.name} ablation under {args.out}",
            hint=f"run them with `bench run --ablation {args.name} ...`",
        )
    table = frame.groupby(["dataset", "ratio", "value"])["accuracy"].agg(["mean", "std", "count"])
    print(table.round(2).to_string())
    for path in plot_ablation(frame, ablation, Path(args.output)):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_tune(args: argparse.Namespace) -> int:

    for path in plot_tuning(read_tuned(Path(args.out) / TUNED_FILE), Path(args.output)):
        print(f"wrote {path}", file=sys.stderr)
    return 0


def cmd_amp(args: argparse.Namespace) -> int:
    """bf16 against float32 per cell, from the runs of ``--out`` under both precisions."""
    read = {"selection": args.selection, "preset": args.preset}
    full = results(args.out, where={"amp": "none"}, **read)
    half = results(args.out, where={"amp": "bf16"}, **read)
    cells = amp_parity.parity(full, half, args.metric)
    if not cells:
        raise BenchError(
            f"no cell of {args.out} ran both in float32 and under bf16 on a shared seed",
            hint="train the same grid twice, once with `--set amp=bf16`",
        )
    text = amp_parity.to_csv(cells)
    if args.output:
        Path(args.output).write_text(text)
        print(f"wrote {args.output}", file=sys.stderr)
    print(amp_parity.render_markdown(amp_parity.read_rows(text)))
    kept = sum(cell.keeps is True for cell in cells)
    print(f"{kept} of {len(cells)} cells keep their accuracy under bf16", file=sys.stderr)
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    what = command_with_verbs(sub, "analyze", "analyses of trained runs", dest="analysis")
    nc = what.add_parser("nc", help="accuracy and NC1-NC3 over training (paper Fig. 2)")
    nc.add_argument("runs", nargs="*", help="run directories")
    nc.add_argument("--out", help="a run store to take runs from (with the filters below)")
    nc.add_argument("--dataset")
    nc.add_argument("--ratio", type=float)
    nc.add_argument("--methods", help="comma list")
    nc.add_argument("-o", "--output", default="nc.png", help="figure path (PNG and PDF)")
    nc.set_defaults(func=cmd_analyze)
    abl = what.add_parser("ablation", help="accuracy against an ablated hyperparameter (Fig. 3)")
    abl.add_argument("name", choices=list(ABLATIONS))
    abl.add_argument("--out", default="results/runs", help="run store")
    abl.add_argument("--selection", default="last", choices=["last", "best_valid", "best_test"])
    abl.add_argument("-o", "--output", default="ablation.png", help="figure path (PNG and PDF)")
    abl.set_defaults(func=cmd_ablation)
    tune = what.add_parser(
        "tune", help="validation accuracy against each tuned hyperparameter (bench tune)"
    )
    tune.add_argument("--out", required=True, help="the run store bench tune wrote")
    tune.add_argument("-o", "--output", default="tune.png", help="figure path (PNG and PDF)")
    tune.set_defaults(func=cmd_tune)
    amp = what.add_parser(
        "amp", help="accuracy under amp=bf16 against float32, paired by seed, per cell"
    )
    amp.add_argument("--out", default="results/runs", help="run store")
    amp.add_argument("--selection", default="last", choices=SELECTIONS)
    amp.add_argument("--metric", default="accuracy", choices=METRICS)
    amp.add_argument("--preset", help="only runs of this preset")
    amp.add_argument(
        "-o",
        "--output",
        help=f"write the cells as CSV (amp=auto reads {amp_parity.PARITY_CSV.name})",
    )
    amp.set_defaults(func=cmd_amp)
