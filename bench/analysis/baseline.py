"""The regression baseline: what ``bench regress record`` keeps of a finished sweep, and its checks.

A baseline cell is one (dataset, method, ratio, protocol) of a sweep; it holds the test
accuracy (overall, bias-aligned, bias-conflicting) of the ``last`` and ``best_valid``
selections of every seed the sweep ran, in the order of ``seeds``, and of ``curve``: each
accuracy's mean over all the run's evaluations (``metrics.jsonl``), the mean height of its
learning curve. Where other kernels turn a seed into another seed only late in training (LC,
LfF+BE: identical to step 100, 2-3.5 points apart at step 240), the curve's mean still pairs
by seed (docs/regression.md, "The learning curve's mean"). Each metric comes with how many
test images it was measured on (the same images for every seed and every evaluation: the
``ci`` subsets do not depend on the seed). Several seeds give the cell's between-seed spread,
against which :mod:`debias_bench.analysis.regression` judges a new run (format 2). A format-1
baseline (one cell per seed, ``dataset/method/rR/sS/protocol``, one number per metric) is read
as format 2: its cells of one configuration become one cell with their seeds.

The baseline is plain JSON, small enough to commit and to review in a diff. A baseline that is
not sound (a cell without a metric every run measures, without a count, with a count <= 0, a
value per seed missing, without its preset) is refused (a :class:`~debias_bench.errors.BenchError`,
exit 2), never a check that passes.
"""

from __future__ import annotations

import math
import platform
import statistics
import time
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from debias_bench import __version__
from debias_bench.errors import BenchError, CorruptDataError
from debias_bench.launchers.run_one import provenance
from debias_bench.reporting.records import COUNTS, load_records
from debias_bench.runs.jsonio import json_text, read_json, write_output
from debias_bench.runs.states import SUCCESS, RunState
from debias_bench.runs.store import RunStore, check_store

FORMAT = 2
#: the formats :func:`load_baseline` reads (1: one cell per seed, before the seeds' spread)
FORMATS = (1, 2)
#: the run's own selections a baseline keeps (debias_bench.config.selection)
RUN_SELECTIONS = ("last", "best_valid")
#: a metric's mean over every evaluation of the run, on the same test images as ``last``
CURVE = "curve"
SELECTIONS = (*RUN_SELECTIONS, CURVE)
TRACKED_METRICS = ("accuracy", "conflicting_accuracy", "aligned_accuracy")
#: what a baseline keeps of each run: (selection, split, metric)
TRACKED = tuple(
    (selection, "test", metric) for selection in SELECTIONS for metric in TRACKED_METRICS
)


def cell_key(dataset: str, method: str, ratio: float, protocol: str) -> str:
    """A baseline cell: one configuration, all its seeds."""
    return f"{dataset}/{method}/r{ratio:g}/{protocol}"


def run_key(dataset: str, method: str, ratio: float, seed: int, protocol: str) -> str:
    """One run of a sweep (and a format-1 baseline cell)."""
    return f"{dataset}/{method}/r{ratio:g}/s{seed}/{protocol}"


def metric_key(selection: str, split: str, metric: str) -> str:
    return f"{selection}.{split}.{metric}"


def environment() -> dict[str, Any]:
    """What produced the numbers: CPU results are bitwise stable only on the same stack (the
    same torch and the same SIMD kernels: ``cpu_capability``, which ``ATEN_CPU_CAPABILITY``
    lowers)."""

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "code_version": __version__,
        "git_commit": provenance()["git_commit"],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": device,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
    }


def curve_metrics(
    evaluations: list[dict[str, Any]], counts: dict[str, int]
) -> tuple[dict[str, float], dict[str, int]]:
    """The ``curve`` metrics of a run whose evaluation records are ``evaluations``: each
    tracked test accuracy's mean over every evaluation that measured the test split, with the
    count of ``last`` (the same test images). A metric some evaluation lacks is left out."""
    tested = [e["test"] for e in evaluations if isinstance(e.get("test"), dict)]
    metrics, kept = {}, {}
    for metric in TRACKED_METRICS:
        values = [t.get(metric) for t in tested]
        if not values or not all(_is_number(v) and math.isfinite(v) for v in values):
            continue
        key = metric_key(CURVE, "test", metric)
        metrics[key] = round(statistics.fmean(values), 4)
        if (n := counts.get(metric_key("last", "test", metric))) is not None:
            kept[key] = n
    return metrics, kept


def _runs(
    frame: pd.DataFrame, store: RunStore | None = None
) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The finished runs in ``frame`` by :func:`run_key`, and one line per unfinished run (a
    run its method declined, ``skipped`` with its reason, is neither: it has no cell); with
    the ``store`` the frame was read from, their ``curve`` metrics too."""
    unfinished = [
        f"{row.run_id}: {row.state}" + (f" ({row.note})" if isinstance(row.note, str) else "")
        for row in frame[~frame["state"].isin(list(SUCCESS))].itertuples()
    ]
    done = frame[frame["state"] == RunState.DONE]
    runs: dict[str, dict[str, Any]] = {}
    for run_id, rows in done.groupby("run_id", sort=False):
        first = rows.iloc[0]
        key = run_key(first.dataset, first.method, first.ratio, int(first.seed), first.protocol)
        if key in runs:
            raise BenchError(
                f"two finished runs for {key}: {runs[key]['run_id']} and {run_id} "
                "(same cell, different hyperparameters or data options)",
                hint="keep one sweep configuration per run store (--out)",
            )
        metrics, counts = {}, {}
        for selection, split, metric in TRACKED:
            if selection == CURVE:
                continue
            match = rows[(rows["selection"] == selection) & (rows["split"] == split)]
            value = match.iloc[0][metric] if len(match) else None
            if value is not None and not math.isnan(value):
                metrics[metric_key(selection, split, metric)] = round(float(value), 4)
                n = match.iloc[0][COUNTS[metric]]
                if n is not None and not math.isnan(n):
                    counts[metric_key(selection, split, metric)] = int(n)
        if store is not None:
            curve, curve_counts = curve_metrics(store.run(str(run_id)).metrics(), counts)
            metrics.update(curve)
            counts.update(curve_counts)
        runs[key] = {
            "dataset": first.dataset,
            "method": first.method,
            "ratio": float(first.ratio),
            "seed": int(first.seed),
            "protocol": first.protocol,
            "preset": first.preset if isinstance(first.preset, str) else None,
            "run_id": run_id,
            "metrics": metrics,
            "counts": counts,  # test images behind each metric
            "data": _fingerprint(first),
        }
    return dict(sorted(runs.items())), unfinished


def _fingerprint(row: Any) -> str | None:
    """The fingerprint of the prepared data a run trained on (None where it recorded none)."""
    value = getattr(row, "data_fingerprint", None)
    return value if isinstance(value, str) and value else None


def by_cell(runs: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Runs (one per seed, as :func:`_runs` or a format-1 baseline holds them) gathered into
    cells of all their seeds: ``metrics`` maps each metric to one value per seed (in the order
    of ``seeds``; a metric some seed lacks is left out, so the check names it missing).
    Seeds of one cell under other presets, or measured on other numbers of test images, are
    refused: they ran another configuration or on other data."""
    cells: dict[str, dict[str, Any]] = {}
    for run in sorted(runs.values(), key=lambda r: r["seed"]):
        key = cell_key(run["dataset"], run["method"], run["ratio"], run["protocol"])
        cell = cells.setdefault(
            key,
            {
                **{k: run[k] for k in ("dataset", "method", "ratio", "protocol", "preset")},
                "seeds": [],
                "run_ids": [],
                "metrics": {},
                "counts": dict(run["counts"]),
                "_lists": {},
            },
        )
        if cell["preset"] != run["preset"]:
            raise BenchError(
                f"the seeds of {key} ran under presets {cell['preset']!r} and "
                f"{run['preset']!r}: a cell's seeds are one configuration",
                hint="keep one sweep configuration per run store (--out)",
            )
        cell["seeds"].append(run["seed"])
        cell["run_ids"].append(run.get("run_id"))
        if run.get("data"):
            cell.setdefault("_data", set()).add(run["data"])
        for name, value in run["metrics"].items():
            cell["_lists"].setdefault(name, []).append(value)
        for name, n in run["counts"].items():
            if cell["counts"].get(name, n) != n:
                raise BenchError(
                    f"the seeds of {key} measured {name} on {cell['counts'][name]} and {n} "
                    "test images: they ran on other data",
                    hint="keep one data build per run store (--out)",
                )
    for cell in cells.values():
        if data := cell.pop("_data", None):  # the prepared data's fingerprints, to compare
            cell["data"] = sorted(data)
        lists = cell.pop("_lists")
        cell["metrics"] = {k: v for k, v in lists.items() if len(v) == len(cell["seeds"])}
        cell["counts"] = {k: n for k, n in cell["counts"].items() if k in cell["metrics"]}
    return dict(sorted(cells.items()))


def sweep_runs(out: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The finished runs of the run store at ``out`` (by :func:`run_key`) and its unfinished
    runs."""
    store = check_store(out)
    return _runs(load_records(store), store)


def sweep_cells(out: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The cells of the run store at ``out`` (:func:`by_cell`) and its unfinished runs."""
    runs, unfinished = sweep_runs(out)
    return by_cell(runs), unfinished


def record(out: Path, allow_unfinished: bool = False) -> dict[str, Any]:
    """A baseline of the finished sweep at ``out``: every seed it ran."""
    cells, unfinished = sweep_cells(out)
    if unfinished and not allow_unfinished:
        raise BenchError(
            f"{len(unfinished)} run(s) in {out} are not finished: " + "; ".join(unfinished[:5]),
            hint="finish them (rerun the same bench run) or pass --allow-unfinished",
        )
    if not cells:
        raise BenchError(f"no finished run in {out}", hint="run the sweep first")
    baseline = {
        "format": FORMAT,
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "environment": environment(),
        "tracked": [metric_key(*t) for t in TRACKED],
        "cells": cells,
    }
    problems = baseline_problems(baseline)  # what a check would refuse (a run without counts)
    if problems:
        raise BenchError(
            f"the runs in {out} do not make a baseline a check can use: " + "; ".join(problems[:3]),
            hint="their results lack it: run the sweep again into a fresh --out and record that",
        )
    return baseline


def save_baseline(baseline: dict[str, Any], path: Path) -> None:
    """Atomically (:func:`~debias_bench.runs.jsonio.write_output`: ``-o``'s errors are one line)."""
    write_output(path, json_text(baseline))


def load_baseline(path: Path) -> dict[str, Any]:
    """The baseline at ``path``, checked (:func:`baseline_problems`) and in format 2: a
    baseline that is not one, holds no cell (nothing would be checked) or a malformed or
    non-finite cell is an error naming the problem, never a check that passes."""
    if not Path(path).is_file():
        raise BenchError(
            f"no baseline at {path}",
            hint="record one: bench regress record --out RUNS -o BASELINE.json",
        )
    data = read_json(Path(path))
    rerecord = f"record it again: bench regress record --out RUNS -o {path}"
    if not isinstance(data, dict) or data.get("format") not in FORMATS or "cells" not in data:
        raise CorruptDataError(
            f"{path} is not a debias-bench baseline (format {' or '.join(map(str, FORMATS))})",
            hint="record it again with bench regress record",
        )
    if isinstance(data["cells"], dict) and not data["cells"]:
        raise CorruptDataError(
            f"{path} holds no cells: a check against it would check nothing", hint=rerecord
        )
    problems = baseline_problems(data)
    if problems:
        more = f" (and {len(problems) - 5} more)" if len(problems) > 5 else ""
        raise CorruptDataError(
            f"{path} is not a valid baseline: " + "; ".join(problems[:5]) + more, hint=rerecord
        )
    if data["format"] == 1:
        try:
            data = {**data, "format": FORMAT, "cells": by_cell(data["cells"])}
        except BenchError as exc:
            raise CorruptDataError(f"{path}: {exc}", hint=rerecord) from exc
    return data


#: what every cell of a baseline holds, and the type each field must have
COMMON_FIELDS: dict[str, type | tuple[type, ...]] = {
    "dataset": str,
    "method": str,
    "ratio": (int, float),
    "protocol": str,
    "preset": str,  # a check refuses runs of another preset
    "metrics": dict,
    "counts": dict,  # images behind each metric: one count > 0 per metric
}
CELL_FIELDS = {1: {**COMMON_FIELDS, "seed": int}, 2: {**COMMON_FIELDS, "seeds": list}}
#: the metrics every run measures (the other accuracies need aligned or conflicting images;
#: ``curve`` is newer than some baselines)
ALWAYS = tuple(metric_key(selection, "test", "accuracy") for selection in RUN_SELECTIONS)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_accuracy(value: Any) -> bool:
    return _is_number(value) and 0 <= value <= 100  # NaN fails both comparisons


def _field_problems(key: str, cell: dict[str, Any], fields: dict[str, Any]) -> list[str]:
    wrong = [
        name
        for name, kind in fields.items()
        if not isinstance(cell.get(name), kind) or isinstance(cell.get(name), bool)
    ]
    if not wrong:
        return []
    missing = [n for n in wrong if n not in cell]
    typed = [n for n in wrong if n in cell]
    text = [f"no {', '.join(missing)}"] if missing else []
    text += [f"{', '.join(typed)} of the wrong type"] if typed else []
    return [f"cell {key!r}: {' and '.join(text)}"]


def _value_problem(name: str, value: Any, seeds: list[int] | None) -> str | None:
    """What is wrong with one metric's value (format 1) or values, one per seed (format 2)."""
    if seeds is None:
        return None if _is_accuracy(value) else f"{name} is {value!r}, not a finite accuracy (%)"
    if not isinstance(value, list) or len(value) != len(seeds):
        return f"{name} is {value!r}, not one accuracy (%) per seed of {seeds}"
    bad = next((v for v in value if not _is_accuracy(v)), None)
    return None if bad is None else f"{name} holds {bad!r}, not a finite accuracy (%)"


def _cell_problems(key: str, cell: Any, version: int) -> list[str]:
    if not isinstance(cell, dict):
        return [f"cell {key!r} is {type(cell).__name__}, not an object"]
    wrong = _field_problems(key, cell, CELL_FIELDS[version])
    if wrong:
        return wrong
    if not math.isfinite(cell["ratio"]):
        return [f"cell {key!r}: ratio {cell['ratio']} is not finite"]
    seeds = cell["seeds"] if version == 2 else None
    problems = []
    if seeds is not None and (
        not seeds
        or not all(isinstance(s, int) and not isinstance(s, bool) for s in seeds)
        or len(set(seeds)) != len(seeds)
    ):
        return [f"cell {key!r}: seeds {seeds!r} are not distinct whole numbers"]
    where = (cell["dataset"], cell["method"], cell["ratio"])
    own = (
        cell_key(*where, cell["protocol"])
        if version == 2
        else run_key(*where, cell["seed"], cell["protocol"])
    )
    if own != key:
        problems.append(f"cell {key!r}: its fields say {own!r}")
    metrics, counts = cell["metrics"], cell["counts"]
    known = {metric_key(*t) for t in TRACKED}
    # every run measures the accuracy; the selections the cell holds are measured on the same
    # test images, so a metric of one is a metric of the others
    held = {name.split(".")[0] for name in metrics if name in known}
    expected = set(ALWAYS) | {
        metric_key(selection, *name.split(".")[1:])
        for name in metrics
        if name in known
        for selection in held | set(RUN_SELECTIONS)
    }
    if not metrics:
        problems.append(f"cell {key!r}: no metrics")
    else:
        problems += [f"cell {key!r}: no metric {n}" for n in sorted(expected - set(metrics))]
    for name, value in metrics.items():
        if name not in known:
            problems.append(f"cell {key!r}: unknown metric {name!r} (known: {sorted(known)})")
        elif (problem := _value_problem(name, value, seeds)) is not None:
            problems.append(f"cell {key!r}: {problem}")
        if name not in counts:
            problems.append(f"cell {key!r}: no counts.{name} (the images behind {name})")
    for name, n in counts.items():
        if name not in metrics:
            problems.append(f"cell {key!r}: counts.{name} without a metric {name}")
        elif isinstance(n, bool) or not isinstance(n, int) or n <= 0:
            problems.append(f"cell {key!r}: counts.{name} is {n!r}, not a whole number > 0")
    data = cell.get("data")  # a run's fingerprint (format 1), a cell's list of them (2)
    if version == 1 and data is not None and not isinstance(data, str):
        problems.append(f"cell {key!r}: data is {data!r}, not a data fingerprint")
    if (
        version == 2
        and data is not None
        and (not isinstance(data, list) or not data or not all(isinstance(d, str) for d in data))
    ):
        problems.append(f"cell {key!r}: data is {data!r}, not a list of data fingerprints")
    if seeds is not None and "kernels" in cell:
        problems += [f"cell {key!r}: {p}" for p in _kernel_problems(cell, seeds)]
    return problems


def _kernel_problems(cell: dict[str, Any], seeds: list[int]) -> list[str]:
    """What is wrong with a cell's ``kernels`` (the same seeds under other SIMD kernels,
    :mod:`debias_bench.analysis.kernel_pairs`): each setting holds recorded seeds and, for
    metrics of the cell, one accuracy per seed."""
    kernels = cell["kernels"]
    if not isinstance(kernels, dict):
        return [f"kernels is {type(kernels).__name__}, not an object of kernel settings"]
    problems = []
    for name, setting in kernels.items():
        if not isinstance(setting, dict) or not isinstance(setting.get("metrics"), dict):
            problems.append(f"kernels.{name} is not an object with seeds and metrics")
            continue
        own = setting.get("seeds")
        if not isinstance(own, list) or not own or not set(own) <= set(seeds):
            problems.append(f"kernels.{name}.seeds {own!r} are not seeds of the cell {seeds}")
            continue
        for metric, values in setting["metrics"].items():
            if metric not in cell["metrics"]:
                problems.append(f"kernels.{name}: metric {metric!r} is not one of the cell's")
            elif (problem := _value_problem(metric, values, own)) is not None:
                problems.append(f"kernels.{name}: {problem}")
    return problems


def baseline_problems(baseline: dict[str, Any]) -> list[str]:
    """What is wrong with a loaded baseline's cells: a cell that is not an object, lacks a
    field of :data:`CELL_FIELDS` (``preset`` and ``counts`` included) or has one of the wrong
    type, whose key does not match its fields; seeds that are not distinct whole numbers; a
    metric that is unknown, not a finite accuracy in [0, 100] (one per seed in format 2), or
    missing (the test accuracy of each selection; a metric of one selection in the other); a
    metric without a count, a count without a metric or that is not a whole number > 0. Empty
    when it is sound (the metrics the new runs measure are checked by ``compare``)."""
    cells = baseline.get("cells")
    if not isinstance(cells, dict):
        return [f"cells is {type(cells).__name__}, not an object of cells"]
    version = baseline.get("format", FORMAT)
    return [p for key, cell in cells.items() for p in _cell_problems(key, cell, version)]
