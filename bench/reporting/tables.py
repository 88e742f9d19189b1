"""Builders: the tidy run records in, table models out (pure functions, no I/O).

* :func:`accuracy_tables` -- Table 1 (synthetic) and Table 2 (real-world) of the paper: rows
  dataset x ratio, columns the methods in the paper's order;
* :func:`classwise_tables` -- Tables D.1 / D.2: one table per BAR ratio, rows the methods,
  columns the actions and the average;
* :func:`cost_table` -- wall time per run and peak memory, relative to Vanilla.

Runs of different protocols or presets are never averaged together: each (protocol, preset)
gets its own table, and the caption says which. Within a table, a cell averages the seeds of one
configuration only (:func:`~debias_bench.reporting.grouping.check_cells` stops the report when a
cell's runs differ in anything but the seed, and names a ``--where`` filter).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pandas as pd

from debias_bench.reporting.grouping import check_cells
from debias_bench.reporting.layout import (
    BAR_PAPER_CLASSES,
    bias_marker,
    dataset_name,
    dataset_order,
    dataset_spec,
    method_name,
    method_order,
    table_of,
)
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.stats import (
    STATISTIC,
    diff_cell,
    mark_best,
    missing_reason,
    seed_stats,
    value_cell,
)
from debias_bench.states import RunState

TITLES = {
    "synthetic": "Debiasing performance on synthetic datasets (the paper's Table 1)",
    "real": "Debiasing performance on real-world datasets (the paper's Table 2)",
    "other": "Debiasing performance on further datasets",
}
PAPER_TABLE = {"synthetic": "Table 1", "real": "Table 2", "bar-classwise": "Tables D.1/D.2"}
REFERENCE_METHOD = "vanilla"


@dataclass(frozen=True)
class ReportOptions:
    selection: str = "last"
    metric: str = "accuracy"
    split: str = "test"
    ours: str | None = "etf_debias"
    digits: int = 2


# ------------------------------------------------------------------------- record helpers
def run_table(records: pd.DataFrame) -> pd.DataFrame:
    """One row per run (its state and cost), whatever its state."""
    runs = records.drop_duplicates("run_id").copy()
    runs["protocol"] = runs["protocol"].fillna("?")
    runs["preset"] = runs["preset"].fillna("?")
    return runs


def finished(records: pd.DataFrame, opts: ReportOptions) -> pd.DataFrame:
    keep = (
        (records["state"] == RunState.DONE)
        & (records["selection"] == opts.selection)
        & (records["split"] == opts.split)
    )
    return records[keep]


def blocks(runs: pd.DataFrame) -> Iterator[tuple[str, str, pd.DataFrame]]:
    """(protocol, preset, runs) groups: numbers from different protocols never mix."""
    for (protocol, preset), block in runs.groupby(["protocol", "preset"], sort=True):
        yield str(protocol), str(preset), block


def _groups(frame: pd.DataFrame, keys: list[str]) -> Iterator[tuple[Any, pd.DataFrame]]:
    """groupby that yields a plain key (not a 1-tuple) for a single key column."""
    for key, group in frame.groupby(keys):
        yield (key[0] if len(keys) == 1 else key), group


def _values(frame: pd.DataFrame, keys: list[str], column: str) -> dict[Any, list[float]]:
    return {k: list(g[column]) for k, g in _groups(frame, keys)}


def _states(runs: pd.DataFrame, keys: list[str]) -> dict[Any, list[str]]:
    return {k: list(g["state"]) for k, g in _groups(runs, keys)}


def _seeds(runs: pd.DataFrame, keys: list[str]) -> dict[Any, int]:
    return {k: int(g["seed"].nunique()) for k, g in _groups(runs, keys)}


def _first_line(text: str, limit: int = 160) -> str:
    """An error's first line, shortened: the full text is in the run's status.json."""
    line = text.strip().splitlines()[0]
    return line if len(line) <= limit else line[: limit - 3] + "..."


def unfinished_notes(runs: pd.DataFrame) -> list[str]:
    """A line per run that is not in the table: unfinished, failed, or skipped (and why)."""
    notes = []
    for _, run in runs[runs["state"] != RunState.DONE].sort_values("run_id").iterrows():
        note = run.get("note")
        reason = f" ({_first_line(note)})" if isinstance(note, str) and note.strip() else ""
        notes.append(f"{run['run_id']}: {run['state']}{reason}")
    return notes


def _where(protocol: str, preset: str) -> str:
    return f" (protocol {protocol}, preset {preset})"


def _meta(protocol: str, preset: str, opts: ReportOptions | None = None) -> dict[str, str]:
    meta = {"protocol": protocol, "preset": preset}
    if opts is not None:
        meta.update(selection=opts.selection, split=opts.split, metric=opts.metric)
    return meta


# ------------------------------------------------------------------------- captions
def _ratio(ratio: float) -> str:
    return f"{ratio:.1f}"


def _test_note(datasets: list[str], split: str) -> str:
    if split != "test":
        return ""
    conflicting = []
    for d in datasets:
        spec = dataset_spec(d)
        kind = getattr(spec, "test_kind", None) or (
            "conflicting" if table_of(d) == "real" else "unbiased"
        )
        if kind == "conflicting":
            conflicting.append(dataset_name(d))
    if not conflicting:
        return " The test sets are unbiased (balanced over biases)."
    return f" The test sets of {', '.join(conflicting)} hold bias-conflicting samples only."


def caption(
    what: str,
    protocol: str,
    preset: str,
    opts: ReportOptions,
    max_n: int,
    markers: bool,
    gain: bool,
    paper: PaperNumbers | None = None,
    paper_table: str = "",
) -> str:
    parts = [
        f"{what} Protocol `{protocol}`, preset `{preset}`, model selection `{opts.selection}`.",
        f"Cells: {STATISTIC}; n = {max_n} seed{'' if max_n == 1 else 's'} unless a cell shows "
        "its own n.",
        "Best per row in bold.",
    ]
    if gain and opts.ours:
        parts.append(
            f"In brackets: {method_name(opts.ours)}'s gain (+) or loss (-) against the best "
            "other method, from the printed means."
        )
    if markers:
        parts.append("(*) and (◇): methods trained with and without bias labels.")
    parts.append(
        "Empty cells say why: not run, running, unfinished, failed, skipped by the method, or "
        "not recorded (finished runs without this selection or metric, e.g. no in-distribution "
        "validation split: each result.json says why) (runs not in the table are listed below "
        "it)."
    )
    if paper is not None:
        parts.append(
            f"Rows `paper`: {paper.short_source()}, {paper_table} ({paper.statistic}; produced "
            f"with the `{paper.protocol}` code paths; bold and brackets as in the paper, among "
            "all its methods); rows `diff`: ours - paper, † where "
            "|diff| exceeds the combined std sqrt(std_ours² + std_paper²) "
            "(std_ours = 0 for a single seed)."
        )
    return " ".join(parts)


# ------------------------------------------------------------------------- accuracy tables
def _paper_cell(stat: tuple[float, float], digits: int) -> Cell:
    return Cell(mean=stat[0], std=stat[1], digits=digits)


def _paper_rows(
    labels: tuple[str, ...], group: str, ours: Row, paper_cells: dict[str, Cell]
) -> list[Row]:
    """The paper's row and the difference row under one of our rows (none without numbers)."""
    if not any(c.has_value for c in paper_cells.values()):
        return []
    diffs = {key: diff_cell(ours.cells[key], cell) for key, cell in paper_cells.items()}
    return [
        Row((*labels, "paper"), paper_cells, "paper", group),
        Row((*labels, "diff"), diffs, "diff", group),
    ]


def _paper_accuracy_row(
    paper: PaperNumbers, dataset: str, ratio: float, methods: list[str], opts: ReportOptions
) -> dict[str, Cell]:
    """The paper's cells of one row; bold and bracket among all the paper's methods, as printed
    in the paper, whichever of them this table shows."""
    full = {
        m: _paper_cell(stat, opts.digits)
        for (d, r, m), stat in paper.accuracy.items()
        if d == dataset and r == ratio
    }
    mark_best(full, opts.ours)
    return {m: full.get(m, Cell(missing="")) for m in methods}


def _paper_classwise(
    paper: PaperNumbers, dataset: str, ratio: float, keys: list[str], opts: ReportOptions
) -> dict[str, dict[str, Cell]]:
    """method -> column -> the paper's cell, bold per column among all the paper's methods."""
    grid: dict[str, dict[str, Cell]] = {}
    for key in keys:
        full = {
            m: _paper_cell(stat, opts.digits)
            for (d, r, m, c), stat in paper.per_class.items()
            if d == dataset and r == ratio and c == key
        }
        mark_best(full, opts.ours, gain=key == "average")
        for m, cell in full.items():
            grid.setdefault(m, {})[key] = cell
    return grid


def accuracy_tables(
    records: pd.DataFrame,
    name: str,
    opts: ReportOptions,
    paper: PaperNumbers | None = None,
) -> list[Table]:
    """The paper's Table 1 (``synthetic``), Table 2 (``real``), or the ``other`` datasets."""
    runs = run_table(records)
    done = finished(records, opts)
    tables = []
    keys = ["dataset", "ratio", "method"]
    for protocol, preset, block in blocks(runs):
        block = block[block["dataset"].map(table_of) == name]
        if block.empty:
            continue
        check_cells(block, keys, _where(protocol, preset))
        bdone = done[done["run_id"].isin(block["run_id"])]
        values = _values(bdone, keys, opts.metric)
        states = _states(block, keys)
        seeds = _seeds(block, keys)
        max_n = max([seed_stats(v)[2] for v in values.values()] or [0])
        methods = method_order(block["method"].unique().tolist())
        datasets = dataset_order(block["dataset"].unique().tolist())
        rows = []
        for dataset in datasets:
            ratios = sorted(block.loc[block["dataset"] == dataset, "ratio"].unique())
            for ratio in ratios:
                cells = {
                    m: value_cell(
                        values.get((dataset, ratio, m), []),
                        states.get((dataset, ratio, m), []),
                        max(max_n, seeds.get((dataset, ratio, m), 0)),
                        opts.digits,
                    )
                    for m in methods
                }
                mark_best(cells, opts.ours)
                labels = (dataset, _ratio(ratio))
                row = Row((*labels, "ours") if paper else labels, cells, "ours", dataset)
                rows.append(row)
                if paper is not None:
                    shown = _paper_accuracy_row(paper, dataset, float(ratio), methods, opts)
                    rows += _paper_rows(labels, dataset, row, shown)
        metric = opts.metric.replace("_", " ")
        what = (
            f"{opts.split.capitalize()} {metric} (%) on "
            f"{', '.join(dataset_name(d) for d in datasets)}." + _test_note(datasets, opts.split)
        )
        tables.append(
            Table(
                name=name,
                title=TITLES[name],
                caption=caption(
                    what,
                    protocol,
                    preset,
                    opts,
                    max_n,
                    True,
                    True,
                    paper,
                    PAPER_TABLE.get(name, ""),
                ),
                row_headers=("dataset", "ratio %", "source") if paper else ("dataset", "ratio %"),
                columns=[Column(m, method_name(m), bias_marker(m)) for m in methods],
                rows=rows,
                notes=unfinished_notes(block),
                display={d: dataset_name(d) for d in datasets},
                meta=_meta(protocol, preset, opts),
            )
        )
    return tables


# ------------------------------------------------------------------------- BAR class-wise
def _paper_class(name: str) -> str | None:
    words = name.lower().replace("_", " ").replace("-", " ").split()
    matches = [c for c in BAR_PAPER_CLASSES if c in words]
    return matches[0] if len(matches) == 1 else None


def class_columns(dataset: str, num_classes: int) -> list[tuple[int, str, str]]:
    """(index into per_class_accuracy, column key, header) per class.

    Names come from the registered dataset's ``class_names``; when every name is one of the
    paper's actions, the columns follow the paper's order and keys (so the paper's numbers line
    up); without names the columns are ``class k``.
    """
    spec = dataset_spec(dataset)
    names = list(getattr(spec, "class_names", ()) or ())
    if len(names) != num_classes:
        return [(k, f"class {k}", f"class {k}") for k in range(num_classes)]
    mapped = [_paper_class(n) for n in names]
    if dataset == "bar" and None not in mapped and len(set(mapped)) == len(mapped):
        index = {paper: k for k, paper in enumerate(mapped)}
        return [(index[c], c, c.capitalize()) for c in BAR_PAPER_CLASSES if c in index]
    return [(k, n, n) for k, n in enumerate(names)]


def _per_class_frame(done: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, class) with that class's accuracy."""
    rows = []
    for _, run in done.iterrows():
        for k, acc in enumerate(run["per_class_accuracy"] or []):
            rows.append({**run.to_dict(), "class_index": k, "class_accuracy": acc})
    return pd.DataFrame(rows)


def classwise_tables(
    records: pd.DataFrame,
    opts: ReportOptions,
    paper: PaperNumbers | None = None,
    dataset: str = "bar",
) -> list[Table]:
    """Tables D.1 and D.2: per-class accuracy of each method, one table per ratio."""
    runs = run_table(records)
    runs = runs[runs["dataset"] == dataset]
    done = finished(records, opts)
    tables = []
    for protocol, preset, block in blocks(runs):
        check_cells(block, ["dataset", "ratio", "method"], _where(protocol, preset))
        bdone = done[done["run_id"].isin(block["run_id"])]
        per_class = _per_class_frame(bdone)
        spec = dataset_spec(dataset)
        num_classes = int(
            getattr(spec, "num_classes", 0)
            or (per_class["class_index"].max() + 1 if len(per_class) else 0)
        )
        columns = class_columns(dataset, num_classes)
        for ratio in sorted(block["ratio"].unique()):
            rows, max_n = _classwise_rows(
                block[block["ratio"] == ratio],
                bdone[bdone["ratio"] == ratio],
                per_class[per_class["ratio"] == ratio] if len(per_class) else per_class,
                columns,
                opts,
                paper,
                dataset,
                float(ratio),
            )
            metric = opts.metric.replace("_", " ")
            what = (
                f"Class-wise {opts.split} accuracy (%) on {dataset_name(dataset)}, "
                f"bias-conflicting ratio {_ratio(ratio)}%; Average: {metric} over the whole "
                f"{opts.split} set (the number of Table 2)." + _test_note([dataset], opts.split)
            )
            text = caption(
                what, protocol, preset, opts, max_n, True, True, paper, PAPER_TABLE["bar-classwise"]
            )
            tables.append(
                Table(
                    name="bar-classwise",
                    title=f"Class-wise accuracy on {dataset_name(dataset)}, ratio "
                    f"{_ratio(ratio)}% (the paper's Tables D.1/D.2)",
                    caption=text.replace("Best per row", "Best per column"),
                    row_headers=("method", "source") if paper else ("method",),
                    columns=[Column(key, header) for _, key, header in columns]
                    + [Column("average", "Average")],
                    rows=rows,
                    notes=unfinished_notes(block[block["ratio"] == ratio]),
                    separated=("average",),
                    meta=_meta(protocol, preset, opts),
                )
            )
    return tables


def _classwise_rows(
    runs: pd.DataFrame,
    done: pd.DataFrame,
    per_class: pd.DataFrame,
    columns: list[tuple[int, str, str]],
    opts: ReportOptions,
    paper: PaperNumbers | None,
    dataset: str,
    ratio: float,
) -> tuple[list[Row], int]:
    """Rows (one per method, plus paper and diff rows) of one class-wise table, and max n."""
    methods = method_order(runs["method"].unique().tolist())
    states = _states(runs, ["method"])
    seeds = _seeds(runs, ["method"])
    average = _values(done, ["method"], opts.metric)
    by_class = (
        _values(per_class, ["method", "class_index"], "class_accuracy") if len(per_class) else {}
    )
    max_n = max([seed_stats(v)[2] for v in average.values()] or [0])
    keys = [key for _, key, _ in columns] + ["average"]

    def cell(method: str, values: list[float]) -> Cell:
        expected = max(max_n, seeds.get(method, 0))
        return value_cell(values, states.get(method, []), expected, opts.digits)

    grid = {
        m: {
            **{key: cell(m, by_class.get((m, k), [])) for k, key, _ in columns},
            "average": cell(m, average.get(m, [])),
        }
        for m in methods
    }
    for key in keys:  # bold per column; the bracket only on the average, as in the paper
        mark_best({m: grid[m][key] for m in methods}, opts.ours, gain=key == "average")
    paper_grid = _paper_classwise(paper, dataset, ratio, keys, opts) if paper else {}
    rows: list[Row] = []
    for m in methods:
        label = method_name(m) + (f" ({bias_marker(m)})" if bias_marker(m) else "")
        row = Row((label, "ours") if paper else (label,), grid[m], "ours", m)
        rows.append(row)
        if paper is not None:
            shown = {key: paper_grid.get(m, {}).get(key, Cell(missing="")) for key in keys}
            rows += _paper_rows((label,), m, row, shown)
    return rows, max_n


# ------------------------------------------------------------------------- cost
COST_QUANTITIES = (
    ("train_time_s", "time / run (s)", 1),
    ("peak_memory_mb", "peak memory (MB)", 0),
)


def cost_table(records: pd.DataFrame) -> list[Table]:
    """Mean wall time per run and peak memory per method, and their ratio to Vanilla.

    Rows are (dataset, device): a CPU run and a GPU run are never compared.
    """
    runs = run_table(records)
    tables = []
    for protocol, preset, block in blocks(runs):
        done = block[block["state"] == RunState.DONE].copy()
        done["device"] = done["device"].fillna("?").astype(str).str.split(":").str[0]
        methods = method_order(block["method"].unique().tolist())
        datasets = dataset_order(block["dataset"].unique().tolist())
        rows = []
        for dataset in datasets:
            druns = block[block["dataset"] == dataset]
            ddone = done[done["dataset"] == dataset]
            states = _states(druns, ["method"])
            for device in sorted(ddone["device"].unique()) or ["-"]:
                dev = ddone[ddone["device"] == device]
                for column, label, digits in COST_QUANTITIES:
                    values = _values(dev, ["method"], column)
                    cells = {
                        m: value_cell(values.get(m, []), states.get(m, []), 0, digits)
                        for m in methods
                    }
                    ref = cells.get(REFERENCE_METHOD)
                    for c in cells.values():
                        if c.mean is not None and ref is not None and ref.mean:
                            c.ratio = c.mean / ref.mean
                        c.std = None  # the spread over ratios is not a noise estimate
                    rows.append(Row((dataset, device, label), cells, "cost", dataset))
        tables.append(
            Table(
                name="cost",
                title="Training cost per run, relative to Vanilla on the same dataset and device",
                caption=(
                    f"Protocol `{protocol}`, preset `{preset}`. Mean over the finished runs (all "
                    "ratios and seeds) of each method; in brackets the ratio to Vanilla's mean on "
                    "the same dataset and device. Time: the engine's train_time_s, the training "
                    "steps plus the method's preparation stage (e.g. LfF+BE's bias committee), "
                    "evaluation excluded. Memory: peak GPU memory allocated by torch on CUDA; on "
                    "CPU the process's peak resident set size, which for runs executed one after "
                    "another in one process includes the earlier runs (compare memory on GPU runs)."
                ),
                row_headers=("dataset", "device", "quantity"),
                columns=[Column(m, method_name(m), bias_marker(m)) for m in methods],
                rows=rows,
                notes=unfinished_notes(block),
                display={d: dataset_name(d) for d in datasets},
                meta=_meta(protocol, preset),
            )
        )
    return tables


# ------------------------------------------------------------------------- plot data
def ratio_curves(records: pd.DataFrame, opts: ReportOptions) -> pd.DataFrame:
    """mean, std, n of the metric per (protocol, preset, dataset, method, ratio)."""
    done = finished(records, opts).copy()
    done["protocol"] = done["protocol"].fillna("?")
    done["preset"] = done["preset"].fillna("?")
    keys = ["protocol", "preset", "dataset", "method", "ratio"]
    check_cells(done, keys)
    rows = []
    for key, group in done.groupby(keys):
        mean, std, n = seed_stats(group[opts.metric])
        rows.append({**dict(zip(keys, key, strict=True)), "mean": mean, "std": std, "n": n})
    return pd.DataFrame(rows, columns=[*keys, "mean", "std", "n"])


__all__ = [
    "ReportOptions",
    "accuracy_tables",
    "classwise_tables",
    "cost_table",
    "missing_reason",
    "ratio_curves",
]
