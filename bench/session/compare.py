"""``debias_bench.compare`` (and ``bench compare A B ...``): does A differ from B, cell by
cell, and how many seeds would tell?

Reads finished runs from a run store (``--out``) or the committed reproduction CSV (``--csv``,
its recipe runs only: the rows with ``overrides`` are variants), and prints per (dataset, ratio)
the difference of the means over seeds, its interval, the test (paired t where the two methods'
runs share seeds and data build, Welch's t otherwise), the p-value and after Holm's correction
over every test printed, and how many seeds per method a two-sided t-test at ``--alpha`` needs
to detect the observed difference with ``--power`` (the observed spread taken as true).
With ``--compare-paper``, the paper's difference and whether its claim holds here.
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from tabulate import tabulate

from debias_bench.errors import ConfigError
from debias_bench.registry import METHODS
from debias_bench.reporting import ReportOptions, load_paper, load_records
from debias_bench.reporting.foreign import ForeignRuns, foreign_runs
from debias_bench.reporting.grouping import apply_where, parse_where
from debias_bench.reporting.layout import method_name
from debias_bench.reporting.paper import DEFAULT_PAPER, PaperNumbers
from debias_bench.reporting.render_latex import escape
from debias_bench.reporting.runs import checked_blocks, finished, run_table
from debias_bench.reporting.significance import (
    MAX_SEEDS,
    PAIRED,
    POWER,
    Compared,
    Difference,
    IntervalSpec,
    Sample,
    compare_methods,
    holm_compared,
    seeds_needed,
)
from debias_bench.reporting.stats import samples_by
from debias_bench.reproduction.export import read_csv
from debias_bench.runs.states import RunState
from debias_bench.runs.store import check_store
from debias_bench.session.report import interval_spec

KEYS = ["dataset", "ratio", "method"]
FORMATS = ("text", "markdown", "csv", "latex")
#: why no line was tested, and the columns left out then (they would all be empty)
NO_TEST = (
    "no test: every cell has fewer than 2 finished seeds of A or of B (a t-test needs 2 each; "
    "run more seeds, e.g. bench run --seeds 0,1,2)"
)
UNTESTED = ("95 % interval", "p", "p (Holm)", "seeds needed", "seeds (α/0)")


@dataclass(frozen=True)
class CompareRequest:
    """Which runs, which methods, which statistics."""

    a: str
    others: tuple[str, ...]
    out: Path | None = None
    csv: Path | None = None
    dataset: str | None = None
    opts: ReportOptions = field(default_factory=lambda: ReportOptions(ours=None))
    protocol: str | None = None
    preset: str | None = None
    where: tuple[str, ...] = ()
    power: float = POWER
    paper: str | None = None


def csv_records(path: Path, selection: str, split: str) -> pd.DataFrame:
    """The recipe runs of a reproduction CSV as finished records (``finished`` reads them)."""
    if split != "test":
        raise ConfigError(f"{path} holds test numbers only", hint="drop --split, or use --out")
    frame = read_csv(path)
    frame = frame[frame["selection"] == selection]
    variants = int((frame["overrides"] != "").sum())
    frame = frame[frame["overrides"] == ""].copy()
    if variants:
        print(f"note: {variants} runs off the recipe left out of {path}", file=sys.stderr)
    frame["state"] = "done"
    frame["split"] = "test"
    frame["run_id"] = [
        f"{r.dataset}_{r.method}_r{r.ratio:g}_s{r.seed}_{r.protocol}_{r.preset}"
        for r in frame.itertuples()
    ]
    return frame


@dataclass
class Source:
    """What the request reads: every record of its source (``all``), those its ``--dataset``,
    ``--protocol``, ``--preset`` and ``--where`` keep (``records``), every method's, and the
    store's runs of a plugin that is not loaded (set apart, as ``bench report`` does)."""

    all: pd.DataFrame
    records: pd.DataFrame
    foreign: ForeignRuns = field(default_factory=ForeignRuns)


def read_source(request: CompareRequest) -> Source:
    opts = request.opts
    foreign = ForeignRuns()
    if request.csv is not None:
        records = csv_records(request.csv, opts.selection, opts.split)
    else:
        assert request.out is not None
        store = check_store(request.out)
        foreign = foreign_runs(store)
        records = load_records(store, skip=foreign.run_ids)
        if foreign.run_ids:
            print(f"note: {foreign.text()}, left out; {foreign.hint('compare')}", file=sys.stderr)
    every = records
    for column in ("protocol", "preset", "dataset"):
        wanted = getattr(request, column)
        if wanted:
            records = records[records[column] == wanted]
    if request.where:
        records = apply_where(records, parse_where(list(request.where)))
    return Source(every, records, foreign)


def samples(
    request: CompareRequest, source: Source | None = None
) -> dict[tuple[str, str], dict[tuple[str, float, str], Sample]]:
    """(protocol, preset) -> (dataset, ratio, method) -> values by seed: from the store, each
    cell checked to hold one configuration, or from the CSV's recipe runs."""
    opts = request.opts
    records = (source or read_source(request)).records
    records = records[records["method"].isin((request.a, *request.others))]
    if request.csv is not None:
        done = records
        blocks = [(str(p), str(s), b) for (p, s), b in records.groupby(["protocol", "preset"])]
    else:
        done = finished(records, opts)
        blocks = list(checked_blocks(run_table(records), KEYS))
    found = {}
    for protocol, preset, block in blocks:
        mine = done[done["run_id"].isin(block["run_id"])]
        cells = samples_by(mine, KEYS, opts.metric)  # keys: (dataset, ratio, method)
        if cells:
            found[(protocol, preset)] = {_cell(key): v for key, v in cells.items()}
    return found


def _cell(key: Any) -> tuple[str, float, str]:
    dataset, ratio, method = key
    return str(dataset), float(ratio), str(method)


def _done(request: CompareRequest, records: pd.DataFrame) -> pd.DataFrame:
    """The records with a finished value of the request's metric."""
    if request.csv is not None:
        return records.dropna(subset=[request.opts.metric])
    return finished(records, request.opts).dropna(subset=[request.opts.metric])


def _check_methods(
    request: CompareRequest,
    found: dict[Any, dict[tuple[str, float, str], Sample]],
    source: Source,
) -> None:
    """Each method asked for has finished runs, else an error saying why it has none (not in
    the store, its runs are of a plugin not loaded, filtered out, not done) and which methods
    have some."""
    asked = {m for cells in found.values() for _, _, m in cells}
    there = sorted(set(_done(request, source.records)["method"]))
    for method in (request.a, *request.others):
        if method in asked:
            continue
        where = f"--csv {request.csv}" if request.csv else f"--out {request.out}"
        filters = [
            f"--{k} {v}" for k in ("dataset", "protocol", "preset") if (v := getattr(request, k))
        ] + [f"--where {w}" for w in request.where]
        why, hint = _why_missing(request, method, source, filters)
        listed = f"methods there with finished runs: {', '.join(there) or 'none'}"
        kept = [*filters, f"selection {request.opts.selection}, {request.opts.metric}"]
        raise ConfigError(
            f"no finished runs of {method!r} in {where} ({'; '.join(kept)}): {why}",
            hint=f"{hint}; {listed}" if hint else listed,
        )


def _why_missing(
    request: CompareRequest, method: str, source: Source, filters: list[str]
) -> tuple[str, str | None]:
    """Why ``method`` has no finished runs to compare, and what to do about it."""
    plugin = source.foreign.names.get(f"method {method}", 0)
    if plugin:
        return (
            f"its {plugin} run{'s are' if plugin != 1 else ' is'} of a plugin that is not loaded",
            source.foreign.hint("compare"),
        )
    mine = source.records[source.records["method"] == method]
    if mine.empty:
        if (source.all["method"] == method).any():
            return f"its runs are all left out by {', '.join(filters)}", "drop or change them"
        if method not in METHODS:
            return "no such method is registered, and the store has no runs of it", (
                "bench list methods names the registered ones"
            )
        return "the store has no runs of it", f"train them: bench run --methods {method} ..."
    runs = run_table(mine)
    states = runs["state"].value_counts()
    if RunState.DONE.value not in states:
        counts = ", ".join(f"{n} {state}" for state, n in states.sort_index().items())
        runs_done = f"none of its {len(runs)} runs is" if len(runs) > 1 else "its only run is not"
        return f"{runs_done} done ({counts})", (
            f"bench status --out {request.out} says why" if request.out else None
        )
    return (
        f"its done runs record no {request.opts.split} {request.opts.metric} under selection "
        f"{request.opts.selection}",
        "choose another --metric or --selection",
    )


def _seeds(n: int | None) -> str:
    if n is None:
        return "–"
    return f"> {MAX_SEEDS}" if n > MAX_SEEDS else str(n)


def family_seeds(d: Difference, alpha: float, m: int, power: float) -> int | None:
    """Seeds per method for ``power`` at alpha/m: Holm's first step, so enough for Holm's
    correction over ``m`` tests whatever the other p-values."""
    return seeds_needed(d.effect, d.test == PAIRED, alpha / max(m, 1), power)


def verdict(c: Compared, paper_diff: float | None, alpha: float, needed: int | None) -> str:
    """Whether the paper's claim (the sign of its difference) holds in these runs; where it
    does not yet, the seeds (``needed``, for the whole family) that would tell."""
    d = c.difference
    if paper_diff is None or d is None:
        return "no claim" if paper_diff is None else "untested (n < 2)"
    if paper_diff == 0 or d.diff == 0:
        return "no direction"
    same = math.copysign(1, d.diff) == math.copysign(1, paper_diff)
    if not same:
        return "reversed" + (" (significant)" if d.holds(alpha) else "")
    return "holds" if d.holds(alpha) else f"needs {_seeds(needed)} seeds"


def rows(
    compared: list[Compared],
    blocks: list[tuple[str, str]],
    spec: IntervalSpec,
    paper: PaperNumbers | None,
    a: str,
    power: float = POWER,
    raw: bool = False,
) -> list[dict[str, Any]]:
    """One line per comparison; ``compared``: the whole family (Holm over it). ``raw``: the
    numbers unrounded (CSV), else as printed."""
    m = sum(c.difference is not None for c in compared)

    def num(value: float | None, fmt: str) -> Any:
        return value if raw or value is None else format(value, fmt)

    out = []
    for c, block in zip(compared, blocks, strict=True):
        d = c.difference
        needed = None if d is None else family_seeds(d, spec.alpha, m, power)
        interval = "" if d is None else f"[{d.low:+.2f}, {d.high:+.2f}]"
        row: dict[str, Any] = {
            "protocol": block[0],
            "preset": block[1],
            "dataset": c.dataset,
            **({"ratio": c.ratio} if raw else {"ratio %": f"{c.ratio:g}"}),
            "B": c.other if raw else method_name(c.other),
        }
        if raw:
            row.update(mean_a=c.mean_a, n_a=c.n_a, mean_b=c.mean_b, n_b=c.n_b)
            row.update(low=None if d is None else d.low, high=None if d is None else d.high)
        else:
            row.update({"A (n)": f"{c.mean_a:.2f} ({c.n_a})", "B (n)": f"{c.mean_b:.2f} ({c.n_b})"})
        minus = " - " if raw else " − "  # CSV and DataFrame columns are ASCII
        row[f"A{minus}B"] = num(c.mean_a - c.mean_b, "+.2f")
        if not raw:
            row[f"{spec.level} interval"] = interval
        row.update(
            {
                "test": "none (n < 2)" if d is None else d.test,
                "p": num(None if d is None else d.p, ".3g"),
                "p (Holm)": num(None if d is None else d.p_adjusted, ".3g"),
                "seeds needed": "" if d is None else _seeds(d.seeds_needed),
                f"seeds (alpha/{m})" if raw else f"seeds (α/{m})": (
                    "" if d is None else _seeds(needed)
                ),
            }
        )
        if paper is not None:
            ours = paper.accuracy.get((c.dataset, c.ratio, a))
            theirs = paper.accuracy.get((c.dataset, c.ratio, c.other))
            claim = None if ours is None or theirs is None else ours[0] - theirs[0]
            row[f"paper A{minus}B"] = num(claim, "+.2f")
            row["paper's claim here"] = verdict(c, claim, spec.alpha, needed)
        out.append({k: ("" if v is None and not raw else v) for k, v in row.items()})
    return out


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
    _check_methods(request, found, source)
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
