"""What the SLURM controller says: whether one answers here, and which jobs it still lists
(also for ``bench status``)."""

from __future__ import annotations

import getpass
import shutil
import subprocess

from debias_bench.runs.states import RunState


def slurm_available() -> str | None:
    """None when a SLURM controller answers here, else why not."""
    if not shutil.which("sbatch") or not shutil.which("squeue"):
        return "sbatch/squeue not found (SLURM client not installed)"
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=20)
    except (OSError, subprocess.SubprocessError) as exc:
        return f"scontrol ping failed: {exc}"
    if "is UP" not in out.stdout:
        first = ((out.stdout + out.stderr).strip().splitlines() or ["no answer"])[0]
        return f"no SLURM controller answers: {first[:200]}"
    return None


def squeue_states(user: str | None = None) -> dict[str, str] | None:
    """job id (``123`` or ``123_4`` for array tasks) -> SLURM state, for the jobs squeue still
    lists (pending, running, completing, ...); None when squeue cannot be asked."""
    cmd = ["squeue", "-h", "-r", "-u", user or getpass.getuser(), "-o", "%i|%T"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    states = {}
    for line in out.stdout.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id:
            states[job_id] = state
    return states


def queue_label(slurm_state: str) -> str:
    """A SLURM job state as the summary counts it."""
    queued = slurm_state in ("PENDING", "REQUEUED", "REQUEUE_HOLD")
    return "queued" if queued else RunState.RUNNING.value
