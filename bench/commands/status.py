"""`bench status`: the state of every run in a run store, from any shell, at any time.

It only reads: each run's ``status.json`` and lock (a run whose process is gone is ``dead``,
never ``running``; a sweep records its runs as ``pending`` before it starts them) and, when
runs were submitted to SLURM, one ``squeue`` call (``queued`` jobs).
"""

from __future__ import annotations

import argparse
import shutil
import textwrap
from collections import Counter
from pathlib import Path
from typing import Any

from tabulate import tabulate

from debias_bench import paths
from debias_bench.launchers.scheduler import eta_seconds, summary_line
from debias_bench.store import RunDir, RunStore

from .common import fmt


def _queue(job_ids: set[str]) -> dict[str, str]:
    """SLURM states of ``job_ids`` that are still queued or running ({} without SLURM)."""
    if not job_ids or not shutil.which("squeue"):
        return {}
    from debias_bench.launchers.slurm import queue_label, squeue_states

    states = squeue_states() or {}
    return {j: queue_label(states[j]) for j in job_ids if j in states}


def collect(store: RunStore) -> list[dict[str, Any]]:
    """One record per run of the store."""
    records = []
    for run_dir in store.runs():
        status, state = run_dir.status(), run_dir.effective_state()
        if run_dir.is_done():
            state = "done"
        records.append(_record(run_dir, status, state))
    in_queue = _queue({r["job_id"] for r in records if r["job_id"]})
    for r in records:
        # A job SLURM still holds whose run has not (re)started yet.
        if r["job_id"] in in_queue and r["state"] in ("pending", "interrupted", "dead", "failed"):
            r["state"] = in_queue[r["job_id"]]
            r["note"] = f"SLURM job {r['job_id']} {r['state']}"
    return records


def _record(run_dir: RunDir, status: dict, state: str) -> dict[str, Any]:
    result = (run_dir.result() or {}) if state == "done" else {}
    last = result.get("selections", {}).get("last", {}).get("test", {})
    # the job a run was last submitted as, unless that job is the one running it
    job_id = status.get("slurm_job_id")
    if state != "running":
        job_id = status.get("submitted_job_id") or job_id
    where = ""
    if status.get("host"):
        where = f"{status['host']}:{status.get('pid', '')}"
        if status.get("gpu") not in (None, ""):
            where += f" gpu {status['gpu']}"
    return {
        "run_id": run_dir.run_id,
        "state": state,
        "status": status,
        "attempt": status.get("attempt", 0),
        "step": f"{status.get('step', 0)}/{status.get('total_steps', '?')}",
        "exit_code": status.get("exit_code"),
        "job_id": job_id,
        "where": where,
        "accuracy": last.get("accuracy"),
        "train_time": result.get("train_time_s"),
        "note": status.get("error") or status.get("reason") or status.get("note") or "",
    }


def counts_and_eta(records: list[dict[str, Any]]) -> tuple[Counter, float | None]:
    counts: Counter = Counter()
    for r in records:
        counts[{"skipped": "done", "interrupted": "pending"}.get(r["state"], r["state"])] += 1
    times = [r["train_time"] for r in records if r["train_time"]]
    remaining = counts["pending"] + counts["queued"] + counts["running"]
    return counts, eta_seconds(times, remaining, max(1, counts["running"]))


def _failure(r: dict[str, Any]) -> str:
    status = r["status"]
    head = [r["run_id"], r["state"], f"attempt {r['attempt']}"]
    if r["exit_code"] is not None:
        head.append(f"exit code {r['exit_code']}")
    if status.get("signal"):
        head.append(status["signal"])
    if r["job_id"]:
        head.append(f"SLURM job {r['job_id']}")
    if r["where"]:
        head.append(r["where"])
    lines = ["  ".join(str(h) for h in head)]
    if r["state"] == "dead":
        lines.append("  its process is gone without recording an outcome; rerun to resume")
    if r["note"]:
        lines.append(textwrap.indent(f"error: {r['note']}", "  "))
    tail = (status.get("stderr_tail") or status.get("traceback_tail") or "").rstrip()
    if tail:
        lines.append("  stderr (last lines):")
        lines.append(textwrap.indent("\n".join(tail.splitlines()[-15:]), "    | "))
    return "\n".join(lines)


def cmd_status(args: argparse.Namespace) -> int:
    store = RunStore(Path(args.out))
    records = collect(store)
    if not records:
        print(f"no runs under {store.root}")
        return 0
    counts, eta = counts_and_eta(records)
    if args.failed:
        failures = [r for r in records if r["state"] in ("failed", "dead")]
        print("\n\n".join(_failure(r) for r in failures) or "no failed runs")
    else:
        rows = [
            [
                r["run_id"],
                r["state"],
                r["attempt"] or "",
                r["step"],
                "" if r["exit_code"] is None else r["exit_code"],
                r["job_id"] or r["where"],
                fmt(r["accuracy"]),
                r["note"].splitlines()[0][:70] if r["note"] else "",
            ]
            for r in records
        ]
        headers = ["run", "state", "try", "step", "exit", "job / where", "test acc", "note"]
        print(tabulate(rows, headers=headers, tablefmt="github"))
    print("\n" + summary_line(counts, len(records), eta))
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    status = sub.add_parser("status", help="states of the runs in a run store")
    status.add_argument("--out", default=str(paths.DEFAULT_OUT))
    status.add_argument(
        "--failed", action="store_true", help="only failures, with exit codes and stderr tails"
    )
    status.set_defaults(func=cmd_status)
