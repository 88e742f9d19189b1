"""`bench report`: tables from the finished runs of a run store."""

from __future__ import annotations

import argparse
from pathlib import Path

from debias_bench import paths
from debias_bench.report import load_records, markdown_table
from debias_bench.store import RunStore


def cmd_report(args: argparse.Namespace) -> int:
    store = RunStore(Path(args.out))
    df = load_records(store)
    print(markdown_table(df, args.selection, args.metric, args.split))
    unfinished = df[df["state"] != "done"]
    if len(unfinished):
        print("\nnot in the table (unfinished, failed or skipped):")
        for _, row in unfinished.iterrows():
            print(
                f"  {row['run_id']}: {row['state']}" + (f" ({row['note']})" if row["note"] else "")
            )
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    report = sub.add_parser("report", help="mean ± std table of finished runs")
    report.add_argument("--out", default=str(paths.DEFAULT_OUT))
    report.add_argument("--selection", default="last", choices=["last", "best_valid", "best_test"])
    report.add_argument(
        "--metric",
        default="accuracy",
        choices=["accuracy", "aligned_accuracy", "conflicting_accuracy", "group_mean_accuracy"],
    )
    report.add_argument("--split", default="test", choices=["test", "valid"])
    report.set_defaults(func=cmd_report)
