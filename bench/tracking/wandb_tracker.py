"""Weights & Biases: one W&B run per run of the store, grouped by sweep (``--out``). Offline
(a run folder under ``OUT/wandb``, ``wandb sync`` uploads it later) when ``WANDB_MODE=offline``
or when no API key is configured, so a missing login or a down network never blocks a run."""

from __future__ import annotations

import netrc
import os
from pathlib import Path
from typing import Any

from debias_bench.runs.states import RunState

from .base import TRACKERS, TrackedRun, Tracker

#: seconds ``wandb.init`` may wait for the server before the run goes on without it
INIT_TIMEOUT_S = 30
DEFAULT_PROJECT = "debias-bench"
#: what W&B refuses in a project name, and its longest one
PROJECT_FORBIDDEN, PROJECT_MAX = "/\\#?%:", 128


def _has_credentials() -> bool:
    if os.environ.get("WANDB_API_KEY"):
        return True
    try:
        return netrc.netrc().authenticators("api.wandb.ai") is not None
    except (OSError, netrc.NetrcParseError):
        return False


def wandb_mode() -> str:
    """``offline`` unless W&B can log in (``WANDB_MODE`` wins when set)."""
    return os.environ.get("WANDB_MODE") or ("online" if _has_credentials() else "offline")


class WandbRun(TrackedRun):
    def __init__(self, run: Any) -> None:
        self.run, self.id = run, str(run.id)

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.run.log(metrics, step=step)

    def finish(self, state: RunState, reason: str, files: list[Path]) -> None:
        self.run.summary["state"] = state.value
        if reason:
            self.run.summary["reason"] = reason
        for path in files:
            self.run.save(str(path), base_path=str(path.parent), policy="now")
        self.run.finish(exit_code=0 if state in (RunState.DONE, RunState.SKIPPED) else 1)


@TRACKERS.register("wandb", display_name=f"Weights & Biases (project; default {DEFAULT_PROJECT})")
class WandbTracker(Tracker):
    kind, extra, modules = "wandb", "wandb", ("wandb",)
    accepted = f"--track wandb (project {DEFAULT_PROJECT}) or wandb=PROJECT"

    @classmethod
    def target_problem(cls, target: str) -> str | None:
        """W&B's own rule for a project name (``wandb.Settings.validate_project``): each run's
        ``wandb.init`` would fail on it, a warning per run, and nothing would be tracked."""
        bad = sorted({c for c in target if c in PROJECT_FORBIDDEN})
        if bad:
            return f"a W&B project name holds none of {PROJECT_FORBIDDEN} (found {''.join(bad)})"
        if len(target) > PROJECT_MAX:
            return f"a W&B project name is at most {PROJECT_MAX} characters, not {len(target)}"
        return None

    @classmethod
    def resolve(cls, target: str, out: Path) -> str:
        return target or DEFAULT_PROJECT

    def start(
        self, run_id: str, resume: str | None, params: dict[str, str], tags: dict[str, str]
    ) -> TrackedRun:
        import wandb

        folder = Path(self.experiment)  # the run store: its runs' W&B folders live in it
        # a plain str for wandb's Literal mode type, whether or not wandb is installed
        mode: dict[str, Any] = {"mode": wandb_mode()}
        run = wandb.init(
            project=self.target,
            group=self.experiment[-128:],
            name=run_id,
            id=resume,  # None: a new run
            resume="allow",
            config=params,
            tags=[f"{k}={v}" for k, v in tags.items() if k != "run_id"][:64],
            dir=str(folder),
            **mode,
            reinit="create_new",
            settings=wandb.Settings(init_timeout=INIT_TIMEOUT_S, silent=True),
        )
        return WandbRun(run)
