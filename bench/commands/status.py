"""`bench status`: the command line of :mod:`debias_bench.session.status` (what each state
means: there)."""

from __future__ import annotations

import argparse
import sys
import textwrap
from typing import Any

from tabulate import tabulate

from debias_bench import paths
from debias_bench.launchers.scheduler import summary_line
from debias_bench.runs.states import RunState
from debias_bench.session.status import PROBLEMS, counts_and_eta, store_status

from .common import fmt, short_note


def _failure(r: dict[str, Any]) -> str:
    status = r["status"]
    state = f"{r['state']} ({r['reason']})" if r.get("reason") else str(r["state"])
    head = [r["run_id"], state, f"attempt {r['attempt']}"]
    if r["exit_code"] is not None:
        head.append(f"exit code {r['exit_code']}")
    if status.get("signal"):
        head.append(status["signal"])
    if r["job_id"]:
        head.append(f"SLURM job {r['job_id']}")
    if r["where"]:
        head.append(r["where"])
    lines = ["  ".join(str(h) for h in head)]
    if r["state"] == RunState.DEAD:
        lines.append("  its process is gone without recording an outcome; rerun to resume")
    if r["state"] == RunState.CORRUPT:
        lines.append(textwrap.indent(r["fault"], "  "))
    elif r["note"]:
        error = status.get("error") or r["note"]
        lines.append(textwrap.indent(f"error: {error}", "  "))
    tail = (status.get("stderr_tail") or status.get("traceback_tail") or "").rstrip()
    if tail:
        lines.append("  stderr (last lines):")
        lines.append(textwrap.indent("\n".join(tail.splitlines()[-15:]), "    | "))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    found = store_status(args.out)
    for note in found.notes:
        print(f"note: {note}", file=sys.stderr)
    records = found.records
    if not records:
        print(f"no runs under {found.root} yet (an empty run store)")
        return 0
    counts, eta = counts_and_eta(records)
    if args.failed:
        failures = [r for r in records if r["state"] in PROBLEMS]
        print("\n\n".join(_failure(r) for r in failures) or "no failed runs")
    else:
        rows = [
            [
                r["run_id"],
                r["preset"],
                r["protocol"],
                r["state"],
                r["attempt"] or "",
                r["step"],
                "" if r["exit_code"] is None else r["exit_code"],
                r["job_id"] or r["where"],
                fmt(r["accuracy"]),
                short_note(r["note"]),
            ]
            for r in records
        ]
        headers = [
            "run",
            "preset",
            "protocol",
            "state",
            "try",
            "step",
            "exit",
            "job / where",
            "test acc",
            "note",
        ]
        print(tabulate(rows, headers=headers, tablefmt="github"))
        corrupt = [r for r in records if r["state"] == RunState.CORRUPT]
        if corrupt:  # the fix does not fit in the table's note
            print(f"\n{len(corrupt)} corrupt run(s): an unreadable file, left untouched:")
            print("\n".join(textwrap.indent(r["fault"], "  ") for r in corrupt))
    running = [r["live"] for r in records if r.get("live") is not None]
    print("\n" + summary_line(counts, len(records), eta, running))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="states of the runs in a run store")
    status.add_argument("--out", default=str(paths.DEFAULT_OUT))
    status.add_argument(
        "--failed", action="store_true", help="only failures, with exit codes and stderr tails"
    )
    status.set_defaults(func=cmd_status)
