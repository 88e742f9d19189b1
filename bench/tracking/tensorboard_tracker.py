"""TensorBoard: one event-file folder per run of the store (``LOGDIR/<run id>``), so
``tensorboard --logdir LOGDIR`` compares the runs of a sweep (default LOGDIR: OUT/tensorboard)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from debias_bench.runs.states import RunState

from .base import TRACKERS, TrackedRun, Tracker


def _markdown(values: dict[str, str]) -> str:
    rows = [f"| {key} | {value} |" for key, value in values.items()]
    return "\n".join(["| key | value |", "|---|---|", *rows])


class TensorBoardRun(TrackedRun):
    def __init__(self, writer: Any, run_id: str) -> None:
        self.writer, self.id = writer, run_id
        self.step = 0

    def log(self, step: int, metrics: dict[str, float]) -> None:
        self.step = step
        for key, value in metrics.items():
            self.writer.add_scalar(key, value, step)
        self.writer.flush()  # live curves: a reader sees each evaluation as it happens

    def finish(self, state: RunState, reason: str, files: list[Path]) -> None:
        text = f"{state.value}: {reason}" if reason else state.value
        # at the last step: an event at an earlier step makes readers drop the later ones
        self.writer.add_text("state", text, global_step=self.step)
        self.writer.close()


@TRACKERS.register("tensorboard", display_name="TensorBoard (default: OUT/tensorboard)")
class TensorBoardTracker(Tracker):
    kind, extra, modules = "tensorboard", "track", ("tensorboard",)

    @classmethod
    def resolve(cls, target: str, out: Path) -> str:
        return str(Path(target or out / "tensorboard").resolve())

    def start(
        self, run_id: str, resume: str | None, params: dict[str, str], tags: dict[str, str]
    ) -> TrackedRun:
        from torch.utils.tensorboard import SummaryWriter

        logdir = Path(self.target) / run_id
        fresh = resume is None or not logdir.is_dir()
        writer = SummaryWriter(log_dir=str(logdir))  # a resumed run adds an event file there
        if fresh:
            writer.add_text("hyperparameters", _markdown(params))
            writer.add_text("tags", _markdown(tags))
        return TensorBoardRun(writer, run_id)
