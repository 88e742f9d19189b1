"""What a report shows: the model selection, metric and split, whose gain is bracketed, and
whether cells carry intervals and significance marks (``interval``)."""

from __future__ import annotations

from dataclasses import dataclass, field

from debias_bench.reporting.intervals import IntervalSpec
from debias_bench.reporting.layout import reference_layout


def _papers_method() -> str | None:
    return reference_layout().ours


@dataclass(frozen=True)
class ReportOptions:
    selection: str = "last"
    metric: str = "accuracy"
    split: str = "test"
    #: the method whose gain or loss against the best other is bracketed (None: no brackets);
    #: the paper's own method unless given
    ours: str | None = field(default_factory=_papers_method)
    digits: int = 2
    #: intervals of the means, ties with the best and ranks (``--interval``); None: the paper's
    #: mean ± std and bold alone
    interval: IntervalSpec | None = None
