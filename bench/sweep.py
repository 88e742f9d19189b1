"""Executing one run of a sweep, skipping what is already done (the grid: ``debias_bench.grid``).

:func:`run_one` executes a run in the calling process (the ``inline`` launcher calls it
directly; the ``local`` and ``slurm`` launchers call it in a worker process, see
``debias_bench.launchers``). It first takes the run's lock, so two sweeps never train the same
run at once, then decides from the recorded state (:func:`decide`):

* done (or skipped by the method) -> nothing to do;
* running in a live process -> left alone;
* pending or interrupted -> started, or resumed from its checkpoint;
* dead (its process vanished without recording an outcome) -> resumed from its checkpoint, as
  a new attempt, unless it already used ``max_attempts`` (then recorded as failed);
* failed -> rerun only with ``retry_failed`` and while fewer than ``max_attempts`` were made.

``attempt`` counts the starts that were not resumptions of a requested stop (an interruption
by a signal or a SLURM preemption is not a new attempt).
"""

from __future__ import annotations

import functools
import os
import subprocess
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from debias_bench import __version__
from debias_bench.config import RunConfig
from debias_bench.engine import DataPlace, Interrupted, Progress, train_run
from debias_bench.errors import BenchError
from debias_bench.registry import DATASETS, METHODS
from debias_bench.store import Heartbeat, RunDir, RunStore

#: default of ``--max-attempts``
MAX_ATTEMPTS = 3


def _git_commit() -> str | None:
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


@functools.cache
def provenance() -> dict[str, Any]:
    return {"code_version": __version__, "git_commit": _git_commit(), "torch": torch.__version__}


@dataclass
class Outcome:
    config: RunConfig
    run_dir: RunDir
    state: str  # done | skipped | failed | interrupted | running
    note: str = ""
    result: dict[str, Any] | None = None
    ran: bool = False


@dataclass(frozen=True)
class Decision:
    action: str  # run | done | skipped | running | failed
    note: str = ""
    new_attempt: bool = True  # False when resuming a requested stop


def decide(
    run_dir: RunDir, retry_failed: bool, max_attempts: int = MAX_ATTEMPTS, owned: bool = False
) -> Decision:
    """What to do with a run, from its recorded state (see the module docstring)."""
    if run_dir.is_done():
        return Decision("done", "already done")
    state = run_dir.effective_state(owned=owned)
    attempts = int(run_dir.status().get("attempt", 0))
    if state == "running":
        return Decision("running", "running in another process")
    if state == "failed":
        if not retry_failed:
            return Decision("failed", "failed before; pass --retry-failed to rerun")
        if attempts >= max_attempts:
            return Decision("failed", f"gave up after {attempts} attempts (--max-attempts)")
        return Decision("run", f"retry {attempts + 1}/{max_attempts}")
    if state == "dead":
        if attempts >= max_attempts:
            return Decision("failed", f"its process died; gave up after {attempts} attempts")
        return Decision("run", "its process died; resuming from the checkpoint")
    if state == "interrupted":
        return Decision("run", "resuming", new_attempt=False)
    return Decision("run")  # pending, skipped (re-asked: the method may have changed)


def run_one(
    config: RunConfig,
    store: RunStore,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None = None,
    retry_failed: bool = False,
    should_stop: Callable[[int], bool] = lambda step: False,
    max_attempts: int = MAX_ATTEMPTS,
    status_fields: dict[str, Any] | None = None,
) -> Outcome:
    """Run (or resume, or skip) one run in this process; see the module docstring.

    ``status_fields`` are recorded in ``status.json`` when the run starts (the worker's GPU,
    thread count, SLURM job id). Raises :class:`Interrupted` after checkpointing when
    ``should_stop`` asked for it."""
    run_dir = store.run(config.run_id)
    if run_dir.is_done():
        return Outcome(config, run_dir, "done", "already done", run_dir.result())
    with run_dir.claim() as owned:
        if not owned:
            return Outcome(config, run_dir, "running", "running in another process")
        decision = decide(run_dir, retry_failed, max_attempts, owned=True)
        if decision.action == "done":
            return Outcome(config, run_dir, "done", decision.note, run_dir.result())
        if decision.action == "failed" and run_dir.effective_state(owned=True) == "dead":
            run_dir.set_status("failed", error=decision.note)
        if decision.action != "run":
            return Outcome(config, run_dir, decision.action, decision.note)
        return _execute(
            config,
            run_dir,
            place,
            device,
            progress,
            should_stop,
            decision,
            status_fields or {},
        )


def _execute(
    config: RunConfig,
    run_dir: RunDir,
    place: DataPlace,
    device: torch.device,
    progress: Progress | None,
    should_stop: Callable[[int], bool],
    decision: Decision,
    status_fields: dict[str, Any],
) -> Outcome:
    """Train the run; the caller holds its lock."""
    method_cls = METHODS.get(config.method)
    reason = method_cls.skip(DATASETS.get(config.dataset).spec, config.hparams)
    run_dir.write_config({**config.to_json(), "run_id": config.run_id, "provenance": provenance()})
    if reason:
        run_dir.set_status("skipped", reason=reason)
        return Outcome(config, run_dir, "skipped", reason)
    previous = run_dir.status()
    attempt = int(previous.get("attempt", 0)) + int(decision.new_attempt)
    run_dir.set_status(
        "running",
        attempt=attempt,
        device=str(device),
        started=time.time(),
        first_started=previous.get("first_started") or time.time(),
        resumed_from=None,
        note=decision.note,
        error=None,
        exit_code=None,
        signal=None,
        traceback_tail=None,
        stderr_tail=None,
        **status_fields,
    )
    with Heartbeat(run_dir):
        try:
            recorded = _Recorded(run_dir, progress)
            result = train_run(config, run_dir, place, device, recorded, should_stop)
        except Interrupted as exc:
            run_dir.set_status("interrupted", note=str(exc), ended=time.time())
            raise
        except KeyboardInterrupt:
            run_dir.set_status(
                "interrupted", note="keyboard interrupt; rerun to resume", ended=time.time()
            )
            raise
        except Exception as exc:
            message = str(exc) if isinstance(exc, BenchError) else f"{type(exc).__name__}: {exc}"
            tail = "".join(traceback.format_exception(exc)[-6:])
            run_dir.set_status(
                "failed", error=message, traceback_tail=tail, exit_code=1, ended=time.time()
            )
            return Outcome(config, run_dir, "failed", message, ran=True)
    run_dir.set_status("done", exit_code=0, ended=time.time())
    return Outcome(config, run_dir, "done", "", result, ran=True)


class _Recorded(Progress):
    """Forwards to the caller's progress and records where the run (re)started."""

    def __init__(self, run_dir: RunDir, inner: Progress | None) -> None:
        self.run_dir, self.inner = run_dir, inner or Progress()

    def start(self, run_id: str, total_steps: int, start_step: int) -> None:
        self.run_dir.heartbeat(resumed_from=start_step, step=start_step, total_steps=total_steps)
        self.inner.start(run_id, total_steps, start_step)

    def advance(self, step: int) -> None:
        self.inner.advance(step)

    def evaluated(self, record: dict[str, Any]) -> None:
        self.inner.evaluated(record)

    def close(self) -> None:
        self.inner.close()


def plan(store: RunStore, configs: list[RunConfig]) -> int:
    """Give every run of a sweep that has no directory yet its ``config.json`` and a
    ``pending`` status, so ``bench status`` counts it from the start; returns how many."""
    planned = 0
    for config in configs:
        run_dir = store.run(config.run_id)
        if run_dir.config_path.is_file():
            continue
        with run_dir.claim(wait_s=0) as owned:
            if owned and not run_dir.config_path.is_file():
                run_dir.write_config(
                    {**config.to_json(), "run_id": config.run_id, "provenance": provenance()}
                )
                run_dir.set_status("pending", planned=time.time())
                planned += 1
    return planned


def record_submission(run_dir: RunDir, job_id: str) -> None:
    """Note the cluster job a run was submitted as (``bench status`` asks the queue about it),
    unless the job already started the run (it then records its own id)."""
    with run_dir.claim() as owned:
        status = run_dir.status()
        state = status.get("state", "pending")
        started_by_it = status.get("slurm_job_id") == job_id
        if owned and state != "running" and not run_dir.is_done() and not started_by_it:
            run_dir.set_status(state, submitted_job_id=job_id)


def worker_identity() -> dict[str, Any]:
    """Where this process runs, for status.json (host and pid are added by set_status)."""
    out: dict[str, Any] = {"threads": torch.get_num_threads()}
    job = os.environ.get("SLURM_ARRAY_JOB_ID"), os.environ.get("SLURM_ARRAY_TASK_ID")
    if all(job):
        out["slurm_job_id"] = f"{job[0]}_{job[1]}"
    elif os.environ.get("SLURM_JOB_ID"):
        out["slurm_job_id"] = os.environ["SLURM_JOB_ID"]
    return out
