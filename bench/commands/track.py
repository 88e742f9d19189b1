"""`bench track export`: send an existing run store to experiment trackers (MLflow,
TensorBoard, W&B), as `bench run --track` would have; running it again sends nothing new."""

from __future__ import annotations

import argparse
import sys

from debias_bench.runs.store import check_store
from debias_bench.tracking import TRACKERS, export_store, parse_specs

from .common import command_with_verbs


def cmd_export(args: argparse.Namespace) -> int:
    store = check_store(args.out)
    specs = parse_specs(args.to, store.root)
    summary = export_store(store, specs)
    targets = ", ".join(spec.key for spec in specs)
    print(
        f"{summary.sent_runs} runs sent ({summary.sent_records} evaluations), "
        f"{summary.up_to_date} already up to date, {len(summary.left_out)} left out -> {targets}",
        file=sys.stderr,
    )
    for run_id, why in sorted(summary.left_out.items()):
        print(f"  {run_id}: {why}", file=sys.stderr)
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    verbs = command_with_verbs(sub, "track", "experiment trackers: send a run store to them")
    export = verbs.add_parser(
        "export", help="send every run of a store (idempotent: only what a target lacks)"
    )
    export.add_argument("--out", required=True, help="the run store")
    export.add_argument(
        "--to",
        action="append",
        required=True,
        metavar="KIND[=TARGET]",
        help="; ".join(f"{e.name}: {e.display_name}" for e in TRACKERS) + " (repeatable)",
    )
    export.set_defaults(func=cmd_export)
