"""``debias_bench.regress_check`` (and ``bench regress check``): a finished sweep against a
baseline of several seeds, cell by cell, with what each cell's check can catch.

:func:`regress_check` reads the run store and the baseline and returns a :class:`RegressCheck`:
per cell its verdict, and per metric the baseline's and the new runs' means, the allowance
(the drop that still passes) and the minimum detectable drop (the true drop the check flags
with 80 % power), each computed by :mod:`debias_bench.analysis.regress_rule`;
:meth:`RegressCheck.explain` shows that computation for one cell. :func:`regress_record` writes
a baseline, :func:`regress_kernels` adds its seeds' values under other kernels to it. The
command prints what comes back; errors are the :class:`~debias_bench.errors.BenchError` that
``bench`` prints as one line (exit 2).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from debias_bench.analysis.check_design import HEADLINES
from debias_bench.analysis.kernel_pairs import add_kernels
from debias_bench.analysis.regress_rule import Allowance
from debias_bench.analysis.regression import (
    DEFAULT_NOISE_Z,
    DEFAULT_TOLERANCE,
    Comparison,
    Difference,
    compare,
    load_baseline,
    record,
    save_baseline,
    sweep_cells,
)
from debias_bench.errors import ConfigError
from debias_bench.reporting.significance import POWER

#: a cell's verdict: the worst of its metrics' statuses, in this order
VERDICTS = ("regressed", "missing", "improved", "changed", "ok", "new")


@dataclass(frozen=True)
class MetricCheck:
    """One metric of one cell: the baseline's mean over its seeds, the new runs' mean, the
    allowance and the minimum detectable drop (points), and how they were computed."""

    metric: str
    status: str  # ok | changed | improved | regressed | missing
    baseline: float | None
    current: float | None
    allowance: float | None
    mdd: float | None
    spread: float | None  # the standard deviation over the baseline's seeds
    rule: Allowance | None = field(default=None, repr=False, compare=False)

    @property
    def diff(self) -> float | None:
        if self.current is None or self.baseline is None:
            return None
        return self.current - self.baseline


@dataclass(frozen=True)
class CellCheck:
    """One cell (dataset x method x ratio x protocol): its verdict and its metrics."""

    cell: str
    dataset: str
    verdict: str  # the worst status of its metrics (:data:`VERDICTS`); ``new``: no baseline
    seeds: int  # K: the baseline's seeds of the cell (0 for a new cell)
    runs: int  # M: the new runs of the cell (0 for a missing cell)
    metrics: tuple[MetricCheck, ...]

    @property
    def headline(self) -> MetricCheck | None:
        """The sharper (the smaller allowance) of the cell's :data:`HEADLINES` the new runs
        measured: the test accuracy of the last model or its learning curve's mean."""
        heads = [m for m in self.metrics if m.metric in HEADLINES and m.allowance is not None]
        return min(heads, key=lambda m: m.allowance or 0.0, default=None)


@dataclass
class RegressCheck:
    """A check's outcome: per cell its verdict, allowance and minimum detectable drop, the
    notes, and the exit code ``bench regress check`` gives (1 when a cell regressed or is
    missing, else 0)."""

    cells: list[CellCheck]
    notes: list[str]
    tolerance: float
    noise_z: float
    seeds: tuple[int, int]  # the fewest and most seeds a baseline cell holds
    baseline: str
    store: str
    power: float = POWER
    comparison: Comparison | None = field(default=None, repr=False)

    @property
    def failed(self) -> list[CellCheck]:
        return [c for c in self.cells if c.verdict in ("regressed", "missing")]

    @property
    def exit_code(self) -> int:
        return 1 if self.failed else 0

    def count(self, status: str) -> int:
        """Metrics (and whole missing or new cells) of this status."""
        return sum(m.status == status for c in self.cells for m in c.metrics or [_whole(c)])

    def mdd_by_dataset(self) -> dict[str, list[float]]:
        """The headline metric's minimum detectable drop of each checked cell, by dataset."""
        out: dict[str, list[float]] = {}
        for cell in self.cells:
            head = cell.headline
            if head is not None and head.mdd is not None:
                out.setdefault(cell.dataset, []).append(head.mdd)
        return out

    def cell(self, name: str) -> CellCheck:
        """The cell named ``name``; an unknown name is a ConfigError with the closest names."""
        for cell in self.cells:
            if cell.cell == name:
                return cell
        names = [c.cell for c in self.cells]
        close = difflib.get_close_matches(name, names, n=3, cutoff=0.4)
        raise ConfigError(
            f"no cell {name!r} in {self.baseline} or {self.store}",
            hint=f"did you mean {' or '.join(close)}?" if close else f"e.g. {names[0]}",
        )

    def explain(self, name: str) -> str:
        """How the allowance and the MDD of every metric of cell ``name`` were computed from
        the baseline's seeds, the new runs and the test images."""
        cell = self.cell(name)
        lines = [
            f"{cell.cell}: {cell.verdict}; baseline of {cell.seeds} seed(s), {cell.runs} new "
            f"run(s); rule: allowance = max(tolerance, z sigma), sigma^2 = s^2 (1/M + 1/K) + "
            "w se^2, or tau_u^2 / M + w se^2 paired by seed (docs/regression.md)"
        ]
        for metric in cell.metrics:
            lines.append("")
            lines.append(f"{metric.metric}: {metric.status}")
            if metric.rule is None:
                lines.append("  not measured by the new runs: nothing to compare")
                continue
            lines += [f"  {line}" for line in metric.rule.explain()]
            assert metric.current is not None and metric.diff is not None
            lines.append(
                f"  new runs' mean {metric.current:.3f}: difference {metric.diff:+.3f} "
                f"against -{metric.allowance:.2f} allowed -> {metric.status}"
            )
        return "\n".join(lines)


def _whole(cell: CellCheck) -> MetricCheck:
    return MetricCheck("(cell)", cell.verdict, None, None, None, None, None)


def _metric(d: Difference) -> MetricCheck:
    return MetricCheck(
        d.metric, d.status, d.baseline, d.current, d.allowed, d.mdd, d.spread, d.rule
    )


def _cells(
    comparison: Comparison, baseline: dict[str, Any], runs: dict[str, dict[str, Any]]
) -> list[CellCheck]:
    by: dict[str, list[Difference]] = {}
    for d in comparison.differences:
        by.setdefault(d.cell, []).append(d)
    out = []
    for key, diffs in by.items():
        base, now = baseline["cells"].get(key), runs.get(key)
        metrics = tuple(_metric(d) for d in diffs if d.metric != "(cell)")
        statuses = {d.status for d in diffs}
        verdict = next(v for v in VERDICTS if v in statuses)
        dataset = (base or now or {}).get("dataset") or key.split("/", 1)[0]
        out.append(
            CellCheck(
                key,
                dataset,
                verdict,
                len(base["seeds"]) if base else 0,
                len(now["seeds"]) if now else 0,
                metrics,
            )
        )
    return out


def regress_check(
    store: str | Path,
    baseline: str | Path,
    *,
    tolerance: float = DEFAULT_TOLERANCE,
    noise_z: float = DEFAULT_NOISE_Z,
) -> RegressCheck:
    """The finished runs in ``store`` checked against the baseline JSON at ``baseline``
    (``bench regress check --out store --baseline baseline``): a metric regresses when the
    mean over a cell's new runs drops below the mean of the baseline's seeds by more than
    ``max(tolerance, noise_z sigma)``. Raises the
    :class:`~debias_bench.errors.BenchError` the command prints (a malformed baseline, one of
    another preset or protocol, no run store)."""
    if tolerance < 0 or noise_z < 0:
        raise ConfigError(f"tolerance and noise_z must be >= 0, not {tolerance:g} and {noise_z:g}")
    recorded = load_baseline(Path(baseline))
    runs, unfinished = sweep_cells(Path(store))
    comparison = compare(recorded, runs, tolerance, unfinished, noise_z, str(baseline), str(store))
    low, high = comparison.seeds or (0, 0)
    return RegressCheck(
        cells=_cells(comparison, recorded, runs),
        notes=list(comparison.notes),
        tolerance=tolerance,
        noise_z=noise_z,
        seeds=(low, high),
        baseline=str(baseline),
        store=str(store),
        comparison=comparison,
    )


@dataclass(frozen=True)
class Recorded:
    """What :func:`regress_record` wrote: the file, its cells and their seed counts."""

    path: Path
    cells: int
    seeds: tuple[int, ...]  # the distinct seed counts of the cells


def regress_record(
    store: str | Path, output: str | Path, *, allow_unfinished: bool = False
) -> Recorded:
    """A baseline of the finished sweep in ``store`` (every seed it ran), written atomically
    to ``output`` (``bench regress record``)."""
    baseline = record(Path(store), allow_unfinished=allow_unfinished)
    save_baseline(baseline, Path(output))
    counts = sorted({len(cell["seeds"]) for cell in baseline["cells"].values()})
    return Recorded(Path(output), len(baseline["cells"]), tuple(counts))


def regress_kernels(store: str | Path, baseline: str | Path, name: str) -> int:
    """Keep the finished runs in ``store``, the baseline's own sweep run again under the
    kernel setting ``name`` (:data:`~debias_bench.analysis.kernel_pairs.OLDER_KERNELS`), in
    the baseline JSON at ``baseline`` (``bench regress kernels``); returns the runs kept.
    Their pairs with the baseline's values let the check compare a seed with itself where
    other kernels move it less than another seed would (docs/regression.md)."""
    if not name or "/" in name:
        raise ConfigError(f"kernel setting name {name!r}: a short word such as avx2")
    recorded = load_baseline(Path(baseline))
    kept = add_kernels(recorded, Path(store), name)
    save_baseline(recorded, Path(baseline))
    return kept
