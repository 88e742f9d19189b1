"""How a search (``bench tune``) ended, as :class:`TuneSummary`: the tuned file it wrote, every
run's outcome, the problems, and the table and lines ``bench tune`` prints.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from debias_bench.analysis.tuning import TunedCell, TunedFile
from debias_bench.launchers.run_one import Outcome


@dataclass
class TuneSummary:
    """How a search ended: the ``tuned`` file it wrote (None before the trials finished),
    every run's outcome by run id, the ``problems`` that make the exit code 1, and the signal
    or detachment that stopped a ``phase`` (``"trials"`` or ``"reruns"``)."""

    store: Path
    tuned: TunedFile | None = None
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    signal: int | None = None
    stopped: str | None = None
    phase: str = "trials"

    @property
    def detached(self) -> bool:
        return bool(self.stopped and self.stopped.startswith("detached"))

    @property
    def finished(self) -> bool:
        """Both phases ran to their end in this process."""
        return self.signal is None and not self.detached

    @property
    def exit_code(self) -> int:
        if self.signal is not None:
            return 128 + self.signal
        if self.detached:
            return 0
        return 1 if self.problems else 0

    def frame(self) -> pd.DataFrame:
        """One row per tuned cell: the winner, its validation accuracy, the chosen values, and
        the reruns' mean test accuracy under the search's selection."""
        rows = []
        for c in self.tuned.cells if self.tuned else []:
            tests = self._rerun_tests(c)
            rows.append(
                {
                    "method": c.method,
                    "dataset": c.dataset,
                    "ratio": c.ratio,
                    "winner": c.trial,
                    "valid_accuracy": c.valid_accuracy,
                    "hparams": dict(c.hparams),
                    "reruns_done": len(tests),
                    "reruns": len(c.runs),
                    "rerun_test_accuracy": sum(tests) / len(tests) if tests else None,
                }
            )
        return pd.DataFrame(rows)

    def _rerun_tests(self, cell: TunedCell) -> list[float]:
        selection = self.tuned.selection if self.tuned else "best_valid"
        done = [self.outcomes[r] for r in cell.runs if r in self.outcomes]
        return [(o.result or {})["selections"][selection]["test"]["accuracy"]
                for o in done if o.result]  # fmt: skip

    def table(self) -> str:
        """The table ``bench tune`` prints at the end, a row per cell."""
        if self.tuned is None:
            return ""
        rows = []
        for c in self.tuned.cells:
            tests = self._rerun_tests(c)
            rows.append(
                [
                    c.method,
                    c.dataset,
                    f"{c.ratio:g}",
                    f"{sum(t['valid_accuracy'] is not None for t in c.trials)}/{len(c.trials)}",
                    "official" if c.trial == 0 else c.trial,
                    fmt(c.valid_accuracy),
                    ", ".join(f"{k}={v}" for k, v in c.hparams.items()),
                    f"{len(tests)}/{len(c.runs)}",
                    fmt(sum(tests) / len(tests) if tests else None),
                ]
            )
        headers = ["method", "dataset", "ratio", "trials done", "winner",
                   f"valid acc ({self.tuned.selection})", "chosen values", "reruns done",
                   "rerun test acc (mean)"]  # fmt: skip
        return tabulate(rows, headers=headers, tablefmt="github")

    def lines(self) -> list[str]:
        """What ``bench tune`` says on stderr after the table (or instead of it, when a phase
        did not finish here)."""
        if self.detached:
            return [str(self.stopped).removeprefix("detached: "),
                    f"rerun the same `bench tune` once the {self.phase} have finished"]  # fmt: skip
        if self.signal is not None:
            return ["interrupted: rerun the same command to resume"]
        selection = self.tuned.selection if self.tuned else ""
        said = [f"\nwinners chosen on validation accuracy ({selection} checkpoint); "
                f"report: `bench report --out {self.store}`"]  # fmt: skip
        said += [f"problem: {problem}" for problem in self.problems]
        if self.problems:
            said.append(f"see `bench status --out {self.store} --failed`")
        return said


def fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"
