"""The timed window of a perf cell: :class:`StepTimer` reads the clock at its two ends (the
"Timing" section of :mod:`debias_bench.perf.speed`), and :func:`peak_memory` is the peak
memory of the cell's process.
"""

from __future__ import annotations

import math
import resource
import sys
import time

import torch

from debias_bench.perf.host_syncs import SyncCounter
from debias_bench.runs.progress import Progress


class StepTimer(Progress):
    """Clock reads at the two ends of the timed window; ``done`` tells the loop to stop.

    The window runs from the end of step ``warmup`` to the end of step ``warmup + steps``, or on
    until it has lasted ``min_time_s``. With ``budget_s``, the warmup ends once it has taken a
    quarter of the budget and the window once it has taken the whole budget (at least one step
    each); a first step that alone took the whole budget is timed itself (beside it, one-time
    costs are negligible) and ends the cell.
    """

    def __init__(
        self,
        warmup: int,
        steps: int,
        device: torch.device,
        budget_s: float | None = None,
        min_time_s: float = 0.0,
        counter: SyncCounter | None = None,
    ) -> None:
        self.warmup, self.steps, self.device, self.budget_s = warmup, steps, device, budget_s
        self.min_time_s, self.counter = min_time_s, counter
        self.began, self.total = 0.0, math.inf
        self.window: list[tuple[int, float]] = []  # (step, time) at the two ends

    def start(self, run_id: str = "", total_steps: int = 0, start_step: int = 0) -> None:
        """A run shorter than the warmup (DFR trains in its preparation stage and then makes
        one update) is timed over its last step."""
        self.began = time.perf_counter()
        self.total = total_steps or math.inf
        if total_steps:
            self.warmup = min(self.warmup, total_steps - 1)
        if self.warmup == 0:
            self._mark(0)

    def _over(self, since: float, fraction: float) -> bool:
        return self.budget_s is not None and time.perf_counter() - since >= fraction * self.budget_s

    def _mark(self, step: int) -> None:
        if self.counter is not None:  # the window's own synchronisation is not counted
            self.counter.active = False
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.window.append((step, time.perf_counter()))
        if self.counter is not None:  # counts inside the window only
            self.counter.active = not self.done

    def advance(self, step: int) -> None:
        if not self.window:
            counting = self.counter is not None  # counts need a step inside the window
            if step == 1 and self.warmup > 0 and self._over(self.began, 1.0) and not counting:
                self.window.append((0, self.began))  # one slow step: time it, stop
                self._mark(step)
            elif step >= self.warmup or self._over(self.began, 0.25):
                self._mark(step)
        elif len(self.window) == 1:
            first_step, first_time = self.window[0]
            long_enough = time.perf_counter() - first_time >= self.min_time_s
            enough = step - first_step >= self.steps and long_enough
            if enough or self._over(first_time, 1.0) or step >= self.total:
                self._mark(step)

    @property
    def done(self) -> bool:
        return len(self.window) == 2

    @property
    def warmup_steps(self) -> int:
        return self.window[0][0] if self.window else 0

    def timed(self) -> tuple[int, float]:
        """(steps, seconds) of the timed window."""
        (a_step, a_time), (b_step, b_time) = self.window
        return b_step - a_step, b_time - a_time


def peak_memory(device: torch.device) -> tuple[float, str]:
    """(MB, what it is) of this process: CUDA max allocated, or the CPU's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "CUDA max allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**20 if sys.platform == "darwin" else 2**10), "peak RSS"
