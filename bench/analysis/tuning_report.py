"""`bench report` for a store that `bench tune` wrote: tuned rows beside the official ones.

``<store>/tuned.yaml`` names every trial and every rerun. The search runs (the trials drawn from a
search space, and the reruns of a drawn winner) are taken out of the paper's tables, which then
show the official configurations only (trial 0 *is* the official configuration, so its runs stay).
Two tables are added:

* **tuned vs official**: per dataset x ratio, a row ``official`` and a row ``tuned`` (the winner's
  reruns), over the rerun seeds for both, with the trial count and the selection rule;
* **tuning cost**: everything the search spent per method (every trial, and the reruns), beside
  one official run, since the paper's cost table counts the official runs only.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from debias_bench.analysis.tuning import (
    TUNED_FILE,
    TunedFile,
    read_tuned,
    search_space,
    valid_split_note,
)
from debias_bench.errors import ConfigError
from debias_bench.reporting.figures import save_png_pdf
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


# ------------------------------------------------------------------------- checks
# ``read_tuned`` (debias_bench.analysis.tuning) refuses a file that is not a tuned file at all;
# these checks refuse one whose fields have the wrong types or that does not fit the run it is used
# for, so `bench run --hparams` and `bench report` fail with one error (exit 2), never a
# traceback and never values silently left out.

Cell3 = tuple[str, str, float]


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _mapping(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, dict):
        problems.append(f"{where} is {_kind(value)}, not a mapping of key: value")
    elif not all(isinstance(k, str) for k in value):
        problems.append(f"{where} has keys that are not names: {sorted(map(str, value))}")


def _ints(value: Any, where: str, problems: list[str]) -> None:
    if not isinstance(value, list) or not all(_is_int(v) and v >= 0 for v in value):
        problems.append(f"{where} is {value!r}, not a list of seeds (integers >= 0)")


def tuned_problems(tuned: TunedFile) -> list[str]:
    """Every field of wrong type or value in ``tuned``, and every cell (method x dataset x
    ratio) given twice; empty when it is sound."""
    problems: list[str] = []
    for name in ("protocol", "preset", "selection"):
        if not isinstance(getattr(tuned, name), str):
            problems.append(f"{name} is {_kind(getattr(tuned, name))}, not a name")
    if not _is_int(tuned.num_trials) or tuned.num_trials < 1:
        problems.append(f"num_trials is {tuned.num_trials!r}, not a whole number >= 1")
    _ints(tuned.tune_seeds, "tune_seeds", problems)
    _ints(tuned.seeds, "seeds", problems)
    _mapping(tuned.fixed, "fixed", problems)
    if not isinstance(tuned.cells, list):
        return [*problems, f"cells is {_kind(tuned.cells)}, not a list of cells"]
    seen: dict[Cell3, int] = {}
    for i, cell in enumerate(tuned.cells):
        where = f"cells[{i}]"
        if not isinstance(cell.method, str) or not isinstance(cell.dataset, str):
            problems.append(f"{where}: method and dataset must be names")
            continue
        where = f"cells[{i}] ({cell.method} {cell.dataset} r{cell.ratio:g})"
        if not math.isfinite(cell.ratio) or cell.ratio <= 0:
            problems.append(f"{where}: ratio {cell.ratio!r} is not a ratio (%) > 0")
        _mapping(cell.hparams, f"{where}: hparams", problems)
        if not _is_int(cell.trial) or cell.trial < 0:
            problems.append(f"{where}: trial is {cell.trial!r}, not a whole number >= 0")
        if not _is_number(cell.valid_accuracy) or not math.isfinite(cell.valid_accuracy):
            problems.append(f"{where}: valid_accuracy is {cell.valid_accuracy!r}, not a number")
        if not isinstance(cell.runs, list) or not all(isinstance(r, str) for r in cell.runs):
            problems.append(f"{where}: runs is {cell.runs!r}, not a list of run ids")
        problems += _trial_problems(cell.trials, where)
        key = (cell.method, cell.dataset, float(cell.ratio))
        if key in seen:
            problems.append(f"{where} repeats cells[{seen[key]}]: one cell, two sets of values")
        seen.setdefault(key, i)
    return problems


def _trial_problems(trials: Any, where: str) -> list[str]:
    if not isinstance(trials, list):
        return [f"{where}: trials is {_kind(trials)}, not a list"]
    problems: list[str] = []
    for j, trial in enumerate(trials):
        here = f"{where}: trials[{j}]"
        if not isinstance(trial, dict):
            problems.append(f"{here} is {_kind(trial)}, not a mapping")
            continue
        if not _is_int(trial.get("trial")):
            problems.append(f"{here}: trial is {trial.get('trial')!r}, not a whole number")
        _mapping(trial.get("hparams"), f"{here}: hparams", problems)
        runs = trial.get("runs")
        if not isinstance(runs, list) or not all(isinstance(r, str) for r in runs):
            problems.append(f"{here}: runs is {runs!r}, not a list of run ids")
        accuracy = trial.get("valid_accuracy")
        if accuracy is not None and not _is_number(accuracy):
            problems.append(f"{here}: valid_accuracy is {accuracy!r}, not a number or null")
    return problems


def read_checked(path: Path | str) -> TunedFile:
    """``tuned.yaml`` read (``read_tuned``) and checked (:func:`tuned_problems`); ConfigError
    listing the problems otherwise."""
    tuned = read_tuned(path)
    problems = tuned_problems(tuned)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise ConfigError(
            f"{path} is not a valid tuned file: " + "; ".join(problems[:5]) + more,
            hint="rerun `bench tune` to write it again (or fix those fields by hand)",
        )
    return tuned


def tuned_values(
    path: Path | str, protocol: str, preset: str
) -> tuple[dict[Cell3, dict[str, Any]], list[str]]:
    """The values ``bench run --hparams PATH`` layers over each cell (``TunedFile.values``),
    and notes. The file must have been tuned under the run's ``--protocol`` (another protocol
    is another recipe: its values do not carry over); another ``--preset`` is a note."""
    tuned = read_checked(path)
    if tuned.protocol != protocol:
        raise ConfigError(
            f"{path} was tuned under protocol {tuned.protocol!r}, not --protocol {protocol!r}",
            hint=f"run with --protocol {tuned.protocol}, or tune under {protocol} "
            f"(`bench tune --protocol {protocol} ...`)",
        )
    notes = []
    if tuned.preset != preset:
        notes.append(
            f"{path} was tuned under preset {tuned.preset!r}; this run uses --preset {preset!r} "
            "(the chosen values are used as they are)"
        )
    return tuned.values(), notes


def check_tuned_cells(
    tuned: dict[Cell3, dict[str, Any]], cells: Iterable[Cell3], path: Path | str
) -> None:
    """Every cell of the grid has values in the tuned file: a cell without would silently run
    its official configuration under ``--hparams``, so it is an error naming those cells."""
    missing = [c for c in dict.fromkeys(cells) if c not in tuned]
    if not missing:
        return
    shown = ", ".join(f"{m} {d} r{r:g}" for m, d, r in missing[:6])
    has = ", ".join(f"{m} {d} r{r:g}" for m, d, r in list(tuned)[:6]) or "none"
    raise ConfigError(
        f"{path} has no tuned values for {len(missing)} cell(s) of this grid: {shown}"
        + (", ..." if len(missing) > 6 else "")
        + f" (it has: {has})",
        hint="narrow --methods/--datasets/--ratios to the tuned cells, tune the others "
        "(`bench tune`), or run them without --hparams",
    )


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


# ------------------------------------------------------------------------- figure
def _axis_values(values: list[Any]) -> tuple[list[float], list[str] | None]:
    """x positions, and tick labels when the values are categories (else None)."""
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return [float(v) for v in values], None
    labels = sorted({str(v) for v in values})
    return [float(labels.index(str(v))) for v in values], labels


def _scale(ax: Any, method: str, dataset: str, key: str, xs: list[float]) -> None:
    """A log axis for a log-uniform key (symlog when the official value is 0)."""
    from matplotlib.ticker import NullFormatter

    dist: Any = search_space(method, dataset).get(key)  # a log-scaled Float/IntDistribution
    if not getattr(dist, "log", False):
        return
    if min(xs) > 0:
        ax.set_xscale("log")
        ax.set_xlim(min(dist.low, *xs) / 1.5, max(dist.high, *xs) * 1.5)  # the whole space
    else:
        ax.set_xscale("symlog", linthresh=dist.low)
    ax.xaxis.set_minor_formatter(NullFormatter())


def plot_tuning(tuned: TunedFile, output: Path) -> list[Path]:
    """Validation accuracy of every trial against each tuned hyperparameter, one row of panels
    per method, one colour per dataset x ratio; the official configuration as a square, the
    winner circled. Written as PNG and PDF."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    methods = method_order([c.method for c in tuned.cells])
    keys = {
        m: sorted({k for c in tuned.cells if c.method == m for k in c.hparams}) for m in methods
    }
    width = max(len(k) for k in keys.values())
    fig, axes = plt.subplots(
        len(methods), width, figsize=(3.6 * width, 3.0 * len(methods)), squeeze=False
    )
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for row, method in enumerate(methods):
        cells = [c for c in tuned.cells if c.method == method]
        for col in range(width):
            ax = axes[row][col]
            if col >= len(keys[method]):
                ax.axis("off")
                continue
            key = keys[method][col]
            trials = [(c, t) for c in cells for t in c.trials if t["valid_accuracy"] is not None]
            xs, ticks = _axis_values([t["hparams"][key] for _, t in trials])
            for i, cell in enumerate(cells):
                colour = colours[i % len(colours)]
                label = f"{dataset_name(cell.dataset)} {cell.ratio:g}%"
                mine = [(x, t) for x, (c, t) in zip(xs, trials, strict=True) if c is cell]
                for x, t in mine:
                    marker = "s" if t["trial"] == 0 else "o"
                    ax.scatter(x, t["valid_accuracy"], color=colour, marker=marker, s=28)
                    if t["trial"] == cell.trial:
                        ax.scatter(
                            x, t["valid_accuracy"], s=160, facecolors="none", edgecolors=colour
                        )
                ax.scatter([], [], color=colour, label=label)
            if ticks is not None:
                ax.set_xticks(range(len(ticks)), ticks)
            elif xs:
                _scale(ax, method, cells[0].dataset, key, xs)
            ax.set_xlabel(key)
            if col == 0:
                ax.set_ylabel(f"{method_name(method)}\nvalid accuracy (%)")
        axes[row][0].legend(fontsize=7)
    fig.suptitle(
        f"bench tune: {tuned.num_trials} trials per cell, validation accuracy at the "
        f"`{tuned.selection}` checkpoint (square: official configuration; circled: chosen)",
        fontsize=10,
    )
    fig.tight_layout()
    return save_png_pdf(fig, output)
