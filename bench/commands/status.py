"""`bench status`: the state of every run in a run store."""

from __future__ import annotations

import argparse
from pathlib import Path

from tabulate import tabulate

from debias_bench import paths
from debias_bench.store import RunStore

from .common import fmt


def cmd_status(args: argparse.Namespace) -> int:
    store = RunStore(Path(args.out))
    rows, counts = [], {}
    for run_dir in store.runs():
        status, state = run_dir.status(), run_dir.effective_state()
        if run_dir.is_done():
            state = "done"
        counts[state] = counts.get(state, 0) + 1
        if args.failed and state not in ("failed", "dead"):
            continue
        result = run_dir.result() or {}
        last = result.get("selections", {}).get("last", {}).get("test", {})
        progress = f"{status.get('step', 0)}/{status.get('total_steps', '?')}"
        note = status.get("error") or status.get("reason") or ""
        rows.append([run_dir.run_id, state, progress, fmt(last.get("accuracy")), note[:80]])
        if args.failed and status.get("traceback_tail"):
            rows.append(["", "", "", "", status["traceback_tail"].strip()[-400:]])
    if not rows and not counts:
        print(f"no runs under {store.root}")
        return 0
    print(tabulate(rows, headers=["run", "state", "step", "test acc", "note"], tablefmt="github"))
    print("\n" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="states of the runs in a run store")
    status.add_argument("--out", default=str(paths.DEFAULT_OUT))
    status.add_argument("--failed", action="store_true", help="only failures, with errors")
    status.set_defaults(func=cmd_status)
