"""`bench report` for a store that `bench tune` wrote: tuned rows beside the official ones.

``<store>/tuned.yaml`` names every trial and every rerun. The search runs (the trials drawn from a
search space, and the reruns of a drawn winner) are taken out of the paper's tables, which then
show the official configurations only (trial 0 *is* the official configuration, so its runs stay).
Two tables are added:

* **tuned vs official**: per dataset x ratio, a row ``official`` and a row ``tuned`` (the winner's
  reruns), over the rerun seeds for both, with the trial count and the selection rule;
* **tuning cost**: everything the search spent per method (every trial, and the reruns), beside
  one official run, since the paper's cost table counts the official runs only.

The checks of a tuned file (also before ``bench run --hparams`` uses it) are
:mod:`debias_bench.analysis.tuned_checks`; the figure of a search (``bench analyze tune``) is
:mod:`debias_bench.analysis.tuning_plot`. Their names are importable from here too.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from debias_bench.analysis.tuned_checks import (
    Cell3,
    check_tuned_cells,
    read_checked,
    tuned_problems,
    tuned_values,
)
from debias_bench.analysis.tuning import TUNED_FILE, TunedFile, valid_split_note
from debias_bench.analysis.tuning_plot import plot_tuning
from debias_bench.reporting.layout import (
    bias_marker,
    dataset_name,
    dataset_order,
    method_name,
    method_order,
)
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.runs import finished, run_table
from debias_bench.reporting.stats import STATISTIC, mark_best, seed_stats, value_cell
from debias_bench.runs.states import RunState

__all__ = [
    "Cell3",
    "TunedView",
    "check_tuned_cells",
    "cost_of_tuning",
    "plot_tuning",
    "read_checked",
    "split_tuned",
    "tuned_problems",
    "tuned_table",
    "tuned_tables",
    "tuned_values",
]


@dataclass
class TunedView:
    """A tuned file and the store's records (after the report's protocol/preset filters)."""

    tuned: TunedFile
    records: pd.DataFrame

    def search_runs(self) -> set[str]:
        """Runs that are not of an official configuration: drawn trials and their reruns."""
        ids: set[str] = set()
        for cell in self.tuned.cells:
            ids.update(r for t in cell.trials if t["trial"] != 0 for r in t["runs"])
            if cell.trial != 0:
                ids.update(cell.runs)
        return ids

    def tuning_runs(self) -> set[str]:
        """The runs kept out of the paper's tables: every trial's (trial 0's too: the official
        configuration, but on the tuning seeds, which only the search uses) and the reruns of
        a drawn winner; a winning trial 0's reruns are official runs."""
        ids = {r for cell in self.tuned.cells for t in cell.trials for r in t["runs"]}
        return ids | self.search_runs()

    def all_runs(self) -> set[str]:
        """Every run the search made: all trials and all reruns."""
        ids = {r for cell in self.tuned.cells for t in cell.trials for r in t["runs"]}
        return ids | {r for cell in self.tuned.cells for r in cell.runs}


def split_tuned(root: Path, records: pd.DataFrame) -> tuple[pd.DataFrame, TunedView | None]:
    """The records of the paper's tables (no tuning run: :meth:`TunedView.tuning_runs`), and
    the tuned view (None without a ``tuned.yaml`` in ``root``)."""
    path = Path(root) / TUNED_FILE
    if not path.is_file():
        return records, None
    view = TunedView(read_checked(path), records)
    return records[~records["run_id"].isin(view.tuning_runs())], view


# ------------------------------------------------------------------------- tuned vs official
def _cells(
    frame: pd.DataFrame, runs: pd.DataFrame, methods: list[str], n: int, opts: ReportOptions
) -> dict[str, Cell]:
    values = {m: list(g[opts.metric]) for m, g in frame.groupby("method")}
    states = {m: list(g["state"]) for m, g in runs.groupby("method")}
    cells = {m: value_cell(values.get(m, []), states.get(m, []), n, opts.digits) for m in methods}
    mark_best(cells, opts.ours)
    return cells


def _caption(tuned: TunedFile, datasets: list[str], opts: ReportOptions, max_n: int) -> str:
    seeds = ", ".join(map(str, tuned.seeds))
    valid = "; ".join(f"{dataset_name(d)}: {valid_split_note(d)}" for d in datasets)
    return " ".join(
        [
            f"{opts.split.capitalize()} {opts.metric.replace('_', ' ')} (%) at the "
            f"`{opts.selection}` checkpoint. Protocol `{tuned.protocol}`, preset `{tuned.preset}`.",
            "Row `official`: each method's own configuration. Row `tuned`: the configuration "
            f"`bench tune` chose per cell among {tuned.num_trials} trial(s) (the official one "
            f"and {tuned.num_trials - 1} drawn from the method's search space), each trained on "
            f"tuning seed(s) {', '.join(map(str, tuned.tune_seeds))}, by the highest mean "
            f"validation accuracy at the `{tuned.selection}` checkpoint (never a test metric).",
            f"Both rows: seeds {seeds}, which the search did not use.",
            f"Validation splits: {valid}.",
            f"Cells: {STATISTIC}; n = {max_n} unless a cell shows its own n. Best per row in "
            "bold"
            + (
                f"; in brackets {method_name(opts.ours)}'s gain against the best other."
                if opts.ours
                else "."
            ),
        ]
    )


def tuned_table(view: TunedView, opts: ReportOptions) -> Table | None:
    """Rows ``official`` and ``tuned`` per dataset x ratio of the tuned cells."""
    tuned = view.tuned
    if not tuned.cells:
        return None
    records = view.records
    records = records[(records["protocol"] == tuned.protocol) & (records["preset"] == tuned.preset)]
    runs, done = run_table(records), finished(records, opts)
    searched = view.search_runs()
    official_runs = runs[~runs["run_id"].isin(searched) & runs["seed"].isin(tuned.seeds)]
    methods = method_order([c.method for c in tuned.cells])
    datasets = dataset_order([c.dataset for c in tuned.cells])
    rows, max_n = [], len(tuned.seeds)
    for dataset in datasets:
        for ratio in sorted({c.ratio for c in tuned.cells if c.dataset == dataset}):
            here = [c for c in tuned.cells if c.dataset == dataset and c.ratio == ratio]
            reruns = {r for c in here for r in c.runs}
            official = official_runs[
                (official_runs["dataset"] == dataset)
                & (official_runs["ratio"] == ratio)
                & official_runs["method"].isin([c.method for c in here])
            ]
            for label, chosen in (
                ("official", official),
                ("tuned", runs[runs["run_id"].isin(reruns)]),
            ):
                frame = done[done["run_id"].isin(chosen["run_id"])]
                cells = _cells(frame, chosen, methods, max_n, opts)
                rows.append(Row((dataset, f"{ratio:.1f}", label), cells, "ours", dataset))
    return Table(
        name="tuned",
        title="Official configurations against tuned ones (bench tune)",
        caption=_caption(tuned, datasets, opts, max_n),
        row_headers=("dataset", "ratio %", "configuration"),
        columns=[Column(m, method_name(m), bias_marker(m)) for m in methods],
        rows=rows,
        display={d: dataset_name(d) for d in datasets},
        meta={
            "protocol": tuned.protocol,
            "preset": tuned.preset,
            "selection": opts.selection,
            "split": opts.split,
            "metric": opts.metric,
        },
    )


# ------------------------------------------------------------------------- cost
def cost_of_tuning(view: TunedView) -> Table | None:
    """What the search cost per method and dataset: every trial and rerun, against one official
    run of the same method."""
    tuned = view.tuned
    runs = run_table(view.records)
    runs = runs[(runs["protocol"] == tuned.protocol) & (runs["preset"] == tuned.preset)]
    done = runs[runs["state"] == RunState.DONE].copy()
    done["device"] = done["device"].fillna("?").astype(str).str.split(":").str[0]
    ours, searched = view.all_runs(), view.search_runs()
    methods = method_order([c.method for c in tuned.cells])
    rows = []
    for dataset in dataset_order([c.dataset for c in tuned.cells]):
        ddone = done[done["dataset"] == dataset]
        for device in sorted(ddone["device"].unique()):
            dev = ddone[ddone["device"] == device]
            spent = dev[dev["run_id"].isin(ours)]
            official = dev[~dev["run_id"].isin(searched)]
            single, count, total = {}, {}, {}
            for m in methods:
                single[m], count[m], total[m] = _cost_cells(official, spent, m)
            for label, cells in (
                ("official: time / run (s)", single),
                ("tuning: runs (trials + reruns)", count),
                ("tuning: total time (s)", total),
            ):
                rows.append(Row((dataset, device, label), cells, "cost", dataset))
    if not rows:
        return None
    return Table(
        name="tuning-cost",
        title="Cost of tuning: every trial counted",
        caption=(
            f"Protocol `{tuned.protocol}`, preset `{tuned.preset}`. Per method and dataset, over "
            f"all tuned ratios: the finished runs of `bench tune` ({tuned.num_trials} trial(s) x "
            f"{len(tuned.tune_seeds)} tuning seed(s) per cell, plus the winner's reruns on "
            f"{len(tuned.seeds)} seed(s)) and their summed train time; in brackets that total as "
            "a multiple of one official-configuration run of the same method on the same device. "
            "The training-cost table counts official-configuration runs only."
        ),
        row_headers=("dataset", "device", "quantity"),
        columns=[Column(m, method_name(m), bias_marker(m)) for m in methods],
        rows=rows,
        display={},
        meta={"protocol": tuned.protocol, "preset": tuned.preset},
    )


def _cost_cells(
    official: pd.DataFrame, spent: pd.DataFrame, method: str
) -> tuple[Cell, Cell, Cell]:
    """One method's cost on one device: the mean train time of an official run, how many
    tuning runs finished, and their summed time (its ratio: that sum in official runs)."""
    per_run = seed_stats(official.loc[official["method"] == method, "train_time_s"])[0]
    times = spent.loc[spent["method"] == method, "train_time_s"].dropna()
    single = Cell(mean=per_run, digits=1) if per_run is not None else Cell(missing="not run")
    if not len(times):
        return single, Cell(missing="not run"), Cell(missing="not run")
    total = Cell(mean=float(times.sum()), digits=1)
    if per_run:
        total.ratio = float(times.sum()) / per_run
    return single, Cell(mean=float(len(times)), digits=0), total


def tuned_tables(view: TunedView | None, opts: ReportOptions) -> list[Table]:
    """The tables a tuned store adds to `bench report` (none without a tuned file)."""
    if view is None:
        return []
    return [t for t in (tuned_table(view, opts), cost_of_tuning(view)) if t is not None]
