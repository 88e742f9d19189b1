"""``debias_bench.compare`` (and ``bench compare A B ...``): does A differ from B, cell by
cell, and how many seeds would tell?

Reads finished runs from a run store (``--out``) or the committed reproduction CSV (``--csv``,
its recipe runs only: the rows with ``overrides`` are variants), and prints per (dataset, ratio)
the difference of the means over seeds, its interval, the test (paired t where the two methods'
runs share seeds and data build, Welch's t otherwise), the p-value and after Holm's correction
over every test printed, and how many seeds per method a two-sided t-test at ``--alpha`` needs
to detect the observed difference with ``--power`` (the observed spread taken as true).
With ``--compare-paper``, the paper's difference and whether its claim holds here.

This module makes and renders the comparison (:func:`comparison`, :func:`compare_text`,
:func:`compare`). The request and the runs it reads are :mod:`debias_bench.session.compare_source`,
the lines :mod:`debias_bench.session.compare_rows`; their names are importable from here too.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
from tabulate import tabulate

from debias_bench.errors import ConfigError
from debias_bench.reporting import ReportOptions, load_paper
from debias_bench.reporting.intervals import IntervalSpec
from debias_bench.reporting.layout import method_name
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.reporting.render_latex import escape
from debias_bench.reporting.significance import POWER, compare_methods, holm_compared
from debias_bench.session.compare_rows import family_seeds, rows, verdict
from debias_bench.session.compare_source import (
    KEYS,
    CompareRequest,
    Source,
    check_methods,
    csv_records,
    read_source,
    samples,
)
from debias_bench.session.report import interval_spec

__all__ = [
    "FORMATS",
    "KEYS",
    "NO_TEST",
    "POWER",
    "UNTESTED",
    "CompareRequest",
    "Comparison",
    "Source",
    "check_methods",
    "check_power",
    "compare",
    "compare_text",
    "comparison",
    "csv_records",
    "family_seeds",
    "header",
    "latex_table",
    "read_source",
    "rows",
    "samples",
    "verdict",
]

FORMATS = ("text", "markdown", "csv", "latex")
#: why no line was tested, and the columns left out then (they would all be empty)
NO_TEST = (
    "no test: every cell has fewer than 2 finished seeds of A or of B (a t-test needs 2 each; "
    "run more seeds, e.g. bench run --seeds 0,1,2)"
)
UNTESTED = ("95 % interval", "p", "p (Holm)", "seeds needed", "seeds (α/0)")


@dataclass
class Comparison:
    """The lines of a comparison (``frame``: one per cell and method B; raw numbers for CSV
    and Python), how many were tested, the (protocol, preset) blocks and the interval."""

    frame: pd.DataFrame
    tests: int
    blocks: int
    spec: IntervalSpec


def comparison(request: CompareRequest, raw: bool = False) -> Comparison:
    """The comparison of ``request``: the numbers unrounded with ``raw``, else as printed."""
    if request.a in request.others:
        raise ConfigError(f"{request.a} is compared with itself", hint="name two methods")
    spec = request.opts.interval or IntervalSpec()
    source = read_source(request)
    found = samples(request, source)
    check_methods(request, found, source)
    paper = load_paper(request.paper) if request.paper else None
    if paper is not None and (request.opts.metric, request.opts.split) != ("accuracy", "test"):
        raise ConfigError("the paper publishes test accuracy", hint="drop --metric/--split")
    with warnings.catch_warnings(record=True) as caught:  # scipy's: a note each, not raw
        warnings.simplefilter("always", RuntimeWarning)
        blocks = [
            (block, c)
            for block, cells in found.items()
            for c in compare_methods(cells, request.a, request.others, spec, request.power)
        ]
        compared = holm_compared([c for _, c in blocks])  # over every test printed
        table = rows(compared, [b for b, _ in blocks], spec, paper, request.a, request.power, raw)
    _notes(caught)
    tests = sum(c.difference is not None for c in compared)
    frame = pd.DataFrame(table)
    if not tests:  # nothing was tested: no test's columns, and the header says why
        print(f"note: {NO_TEST}", file=sys.stderr)
        untested = UNTESTED if not raw else ("seeds (alpha/0)",)
        frame = frame.drop(columns=[c for c in frame.columns if c in untested])
    return Comparison(frame, tests, len(found), spec)


def compare_text(request: CompareRequest, fmt: str = "text") -> str:
    """The comparison, rendered: a header saying what was tested, then one line per cell."""
    made = comparison(request, raw=fmt == "csv")
    frame, tests, spec = made.frame, made.tests, made.spec
    if fmt == "csv":
        return frame.to_csv(index=False)
    if made.blocks <= 1:
        frame = frame.drop(columns=["protocol", "preset"])
    if fmt == "latex":
        return latex_table(header(request, spec, tests), frame)
    body = tabulate(
        frame.to_dict("list"),
        headers="keys",
        tablefmt="github" if fmt == "markdown" else "simple",
        disable_numparse=True,
    )
    return header(request, spec, tests) + "\n\n" + body + "\n"


def latex_table(caption: str, frame: pd.DataFrame) -> str:
    """A booktabs table of the comparison's lines (``\\usepackage{booktabs}``), its caption
    the header of the text format; to ``\\input`` into a paper."""
    spec = "l" * 3 + "r" * (len(frame.columns) - 3)
    lines = [
        r"\begin{table}[t]",
        r"\centering\small",
        rf"\caption{{{escape(caption)}}}",
        rf"\begin{{tabular}}{{{spec}}}",
        r"\toprule",
        " & ".join(escape(str(c)) for c in frame.columns) + r" \\",
        r"\midrule",
        *(" & ".join(escape(str(v)) for v in row) + r" \\" for row in frame.itertuples(False)),
        r"\bottomrule",
        r"\end{tabular}",
        r"\end{table}",
    ]
    return "\n".join(lines) + "\n"


def _notes(caught: list[warnings.WarningMessage]) -> None:
    """A numerical warning of the tests (scipy's RuntimeWarning) as one note line each; any
    other warning as Python shows it."""
    notes = []
    for w in caught:
        if issubclass(w.category, RuntimeWarning):
            notes.append(str(w.message).split(". ")[0])
        else:
            warnings.showwarning(w.message, w.category, w.filename, w.lineno)
    for message in dict.fromkeys(notes):
        print(f"note: the tests warned: {message}; check the numbers above", file=sys.stderr)


def header(request: CompareRequest, spec: IntervalSpec, m: int) -> str:
    """What the lines below are, and which tests and assumptions made them."""
    opts = request.opts
    source = f"`{request.csv}` (recipe runs)" if request.csv else f"run store `{request.out}`"
    interval = spec.describe_difference()
    others = ", ".join(method_name(o) for o in request.others)
    what = (
        f"A = {method_name(request.a)} against B = {others}: {opts.split} "
        f"{opts.metric.replace('_', ' ')} (%), selection `{opts.selection}`, from {source}. "
    )
    if m == 0:
        why = NO_TEST[0].upper() + NO_TEST[1:]
        return f"{what}A − B: the difference of the means over seeds. {why}."
    return (
        f"{what}A − B: the difference of the means over seeds, with {interval}. Test: two-sided "
        "paired t where A's and B's runs share seeds and data build (one seed gives both the "
        "same batch order), Welch's t otherwise; p (Holm): corrected over the "
        f"{m} test{'' if m == 1 else 's'} below. Seeds needed: per method, for a two-sided "
        f"t-test at α = {spec.alpha:g} to detect the observed difference with "
        f"{100 * request.power:g} % power, the observed spread taken as true: for one test "
        f"alone, and at α/{m} (Holm's first step: enough whatever the other tests give)."
    )


def compare(
    store: str | Path | None,
    a: str,
    b: str | Sequence[str],
    *,
    csv: str | Path | None = None,
    dataset: str | None = None,
    selection: str = "last",
    metric: str = "accuracy",
    split: str = "test",
    interval: str = "t",
    alpha: float | None = None,
    protocol: str | None = None,
    preset: str | None = None,
    where: Sequence[str] = (),
    power: float = POWER,
    compare_paper: bool = False,
    paper: str = DEFAULT_PAPER,
) -> pd.DataFrame:
    """``bench compare A B ...`` as a DataFrame: one row per (dataset, ratio, B), the numbers
    unrounded (the columns of ``--format csv``). ``store``: the run store (or None with
    ``csv``: a reproduction CSV). Raises the :class:`~debias_bench.errors.BenchError` the
    command prints."""
    request = CompareRequest(
        a=a,
        others=(b,) if isinstance(b, str) else tuple(b),
        out=Path(store) if store is not None else None,
        csv=Path(csv) if csv is not None else None,
        dataset=dataset,
        opts=ReportOptions(
            selection=selection,
            metric=metric,
            split=split,
            ours=None,
            interval=interval_spec(interval, alpha),
        ),
        protocol=protocol,
        preset=preset,
        where=tuple(where),
        power=check_power(power),
        paper=paper if compare_paper else None,
    )
    return comparison(request, raw=True).frame


def check_power(power: float) -> float:
    if not 0 < power < 1:
        raise ConfigError(f"--power {power} is not in (0, 1)", hint="e.g. --power 0.8")
    return power
