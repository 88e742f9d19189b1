"""The runs ``bench compare`` compares (:class:`CompareRequest`): read from a run store or a
reproduction CSV's recipe runs and filtered as asked, each method's values by seed per cell
(dataset, ratio), and, where a method asked for has no finished runs, an error saying why.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd

from debias_bench.errors import ConfigError
from debias_bench.registry import METHODS
from debias_bench.reporting import ReportOptions, load_records
from debias_bench.reporting.foreign import ForeignRuns, foreign_runs
from debias_bench.reporting.grouping import apply_where, parse_where
from debias_bench.reporting.runs import checked_blocks, finished, run_table
from debias_bench.reporting.significance import POWER, Sample
from debias_bench.reporting.stats import samples_by
from debias_bench.reproduction.export import read_csv
from debias_bench.runs.states import RunState
from debias_bench.runs.store import check_store

KEYS = ["dataset", "ratio", "method"]


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


def check_methods(
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
