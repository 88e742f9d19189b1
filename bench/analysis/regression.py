"""Accuracy regression checks: a baseline of a finished sweep, and a new sweep compared with it.

``record`` keeps, per cell (dataset x method x ratio x seed x protocol), the test accuracy
(overall, bias-aligned, bias-conflicting) of the ``last`` and ``best_valid`` selections of a
finished sweep (usually the ``ci`` preset), with the environment that produced them.
``compare`` sets a new sweep beside it: a metric that drops by more than its tolerance, or a
cell the new sweep lacks, is a regression. Gains are reported, never failed: lock them in by
recording again. Every difference is listed (``changed``).

A metric's tolerance is the larger of ``--tolerance`` (points) and ``z`` standard errors of a
proportion measured on that metric's samples (``z * 100 * sqrt(p (1 - p) / n)``, ``--noise-z``,
default 3; 0: the plain tolerance), ``n`` being the number of test images the new run evaluated
that metric on: the baseline's own counts are checked and compared (a note when they differ),
never trusted for the noise, so a baseline edited to a tiny count cannot widen it. On the
machine that recorded the baseline the numbers are identical; on another CPU (another SIMD
kernel, another BLAS) a short run's float rounding takes another path, and an accuracy on 100
bias-aligned images moves by several points for that reason alone (measured: up to 7 points on
Corrupted CIFAR-10's aligned subset, with bit-identical code). The noise term keeps such drift
from failing CI while a broken method, which loses tens of points, still does.

The baseline is plain JSON, small enough to commit and to review in a diff. A baseline that is
not sound (a cell without a metric the run measures, without a count, with a count <= 0, without
its preset) or that was recorded under another preset or protocol than the new sweep's runs is
refused (a :class:`~debias_bench.errors.BenchError`, exit 2), never a check that passes.
"""

from __future__ import annotations

import math
import platform
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from debias_bench import __version__
from debias_bench.errors import BenchError, CorruptDataError
from debias_bench.launchers.preflight import check_store
from debias_bench.launchers.run_one import provenance
from debias_bench.reporting.records import COUNTS, load_records
from debias_bench.reporting.stats import difference
from debias_bench.runs.jsonio import read_json, write_json
from debias_bench.runs.states import RunState

FORMAT = 1
SELECTIONS = ("last", "best_valid")
#: what a baseline keeps of each run: (selection, split, metric)
TRACKED = tuple(
    (selection, "test", metric)
    for selection in SELECTIONS
    for metric in ("accuracy", "conflicting_accuracy", "aligned_accuracy")
)
DEFAULT_TOLERANCE = 1.0
#: standard errors of sampling noise a drop may reach before it is a regression
DEFAULT_NOISE_Z = 3.0


def cell_key(dataset: str, method: str, ratio: float, seed: int, protocol: str) -> str:
    return f"{dataset}/{method}/r{ratio:g}/s{seed}/{protocol}"


def metric_key(selection: str, split: str, metric: str) -> str:
    return f"{selection}.{split}.{metric}"


def environment() -> dict[str, Any]:
    """What produced the numbers: CPU results are bitwise stable only on the same stack."""

    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
    return {
        "code_version": __version__,
        "git_commit": provenance()["git_commit"],
        "torch": torch.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "device": device,
    }


def _cells(frame: pd.DataFrame) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Cells of the finished runs in ``frame``, and one line per run that is not finished."""
    unfinished = [
        f"{row.run_id}: {row.state}" + (f" ({row.note})" if isinstance(row.note, str) else "")
        for row in frame[frame["state"] != RunState.DONE].itertuples()
    ]
    done = frame[frame["state"] == RunState.DONE]
    cells: dict[str, dict[str, Any]] = {}
    for run_id, rows in done.groupby("run_id", sort=False):
        first = rows.iloc[0]
        key = cell_key(first.dataset, first.method, first.ratio, int(first.seed), first.protocol)
        if key in cells:
            raise BenchError(
                f"two finished runs for {key}: {cells[key]['run_id']} and {run_id} "
                "(same cell, different hyperparameters or data options)",
                hint="keep one sweep configuration per run store (--out)",
            )
        metrics, counts = {}, {}
        for selection, split, metric in TRACKED:
            match = rows[(rows["selection"] == selection) & (rows["split"] == split)]
            value = match.iloc[0][metric] if len(match) else None
            if value is not None and not math.isnan(value):
                metrics[metric_key(selection, split, metric)] = round(float(value), 4)
                n = match.iloc[0][COUNTS[metric]]
                if n is not None and not math.isnan(n):
                    counts[metric_key(selection, split, metric)] = int(n)
        cells[key] = {
            "dataset": first.dataset,
            "method": first.method,
            "ratio": float(first.ratio),
            "seed": int(first.seed),
            "protocol": first.protocol,
            "preset": first.preset if isinstance(first.preset, str) else None,
            "run_id": run_id,
            "metrics": metrics,
            "counts": counts,  # samples behind each metric (its noise)
        }
    return dict(sorted(cells.items())), unfinished


def sweep_cells(out: Path) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """The cells of the run store at ``out`` and its unfinished runs."""
    return _cells(load_records(check_store(out)))


def record(out: Path, allow_unfinished: bool = False) -> dict[str, Any]:
    """A baseline of the finished sweep at ``out``."""
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
    path.parent.mkdir(parents=True, exist_ok=True)
    write_json(path, baseline)


def load_baseline(path: Path) -> dict[str, Any]:
    """The baseline at ``path``, checked (:func:`baseline_problems`): a baseline that is not
    one, holds no cell (nothing would be checked) or a malformed or non-finite cell is an error
    naming the problem, never a check that passes."""
    if not Path(path).is_file():
        raise BenchError(
            f"no baseline at {path}",
            hint="record one: bench regress record --out RUNS -o BASELINE.json",
        )
    data = read_json(Path(path))
    rerecord = f"record it again: bench regress record --out RUNS -o {path}"
    if not isinstance(data, dict) or data.get("format") != FORMAT or "cells" not in data:
        raise CorruptDataError(
            f"{path} is not a debias-bench baseline (format {FORMAT})",
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
    return data


#: what every cell of a baseline holds, and the type each field must have
CELL_FIELDS: dict[str, type | tuple[type, ...]] = {
    "dataset": str,
    "method": str,
    "ratio": (int, float),
    "seed": int,
    "protocol": str,
    "preset": str,  # a check refuses runs of another preset
    "metrics": dict,
    "counts": dict,  # images behind each metric: one count > 0 per metric
}
#: the metrics every run measures (the other accuracies need aligned or conflicting images)
ALWAYS = tuple(metric_key(selection, "test", "accuracy") for selection in SELECTIONS)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def baseline_problems(baseline: dict[str, Any]) -> list[str]:
    """What is wrong with a loaded baseline's cells: a cell that is not an object, lacks a
    field of :data:`CELL_FIELDS` (``preset`` and ``counts`` included) or has one of the wrong
    type, whose key does not match its fields; a metric that is unknown, not a finite accuracy
    in [0, 100], or missing (the test accuracy of each selection; a metric of one selection in
    the other); a metric without a count, a count without a metric or that is not a whole
    number > 0. Empty when it is sound (the metrics the new runs measure are checked by
    :func:`compare`)."""
    cells = baseline.get("cells")
    if not isinstance(cells, dict):
        return [f"cells is {type(cells).__name__}, not an object of cells"]
    known = {metric_key(*t) for t in TRACKED}
    problems: list[str] = []
    for key, cell in cells.items():
        if not isinstance(cell, dict):
            problems.append(f"cell {key!r} is {type(cell).__name__}, not an object")
            continue
        wrong = [
            name
            for name, kind in CELL_FIELDS.items()
            if not isinstance(cell.get(name), kind) or isinstance(cell.get(name), bool)
        ]
        if wrong:
            missing = [n for n in wrong if n not in cell]
            typed = [n for n in wrong if n in cell]
            text = []
            if missing:
                text.append(f"no {', '.join(missing)}")
            if typed:
                text.append(f"{', '.join(typed)} of the wrong type")
            problems.append(f"cell {key!r}: {' and '.join(text)}")
            continue
        if not math.isfinite(cell["ratio"]):
            problems.append(f"cell {key!r}: ratio {cell['ratio']} is not finite")
            continue
        own = cell_key(
            cell["dataset"], cell["method"], cell["ratio"], cell["seed"], cell["protocol"]
        )
        if own != key:
            problems.append(f"cell {key!r}: its fields say {own!r}")
        metrics, counts = cell["metrics"], cell["counts"]
        # every run measures the accuracy; both selections are measured on the same test
        # images, so a metric of one is a metric of the other
        expected = set(ALWAYS) | {
            metric_key(selection, *name.split(".")[1:])
            for name in metrics
            if name in known
            for selection in SELECTIONS
        }
        if not metrics:
            problems.append(f"cell {key!r}: no metrics")
        else:
            problems += [f"cell {key!r}: no metric {n}" for n in sorted(expected - set(metrics))]
        for name, value in metrics.items():
            if name not in known:
                problems.append(f"cell {key!r}: unknown metric {name!r} (known: {sorted(known)})")
            elif not _is_number(value) or not 0 <= value <= 100:  # NaN fails both comparisons
                problems.append(f"cell {key!r}: {name} is {value!r}, not a finite accuracy (%)")
            if name not in counts:
                problems.append(f"cell {key!r}: no counts.{name} (the images behind {name})")
        for name, n in counts.items():
            if name not in metrics:
                problems.append(f"cell {key!r}: counts.{name} without a metric {name}")
            elif isinstance(n, bool) or not isinstance(n, int) or n <= 0:
                problems.append(f"cell {key!r}: counts.{name} is {n!r}, not a whole number > 0")
    return problems


@dataclass(frozen=True)
class Difference:
    cell: str
    metric: str
    baseline: float | None
    current: float | None
    status: str  # ok | changed | improved | regressed | missing | new

    @property
    def diff(self) -> float | None:
        return difference(self.current, self.baseline)


@dataclass
class Comparison:
    differences: list[Difference]
    tolerance: float
    notes: list[str]
    noise_z: float = DEFAULT_NOISE_Z

    @property
    def failed(self) -> list[Difference]:
        return [d for d in self.differences if d.status in ("regressed", "missing")]

    def count(self, status: str) -> int:
        return sum(d.status == status for d in self.differences)


def noise(percent: float, n: int | None, z: float) -> float:
    """``z`` standard errors (points) of an accuracy of ``percent`` % measured on ``n``."""
    if not n or z <= 0:
        return 0.0
    p = min(max(percent / 100, 0.0), 1.0)
    return z * 100 * math.sqrt(p * (1 - p) / n)


def _status(baseline: float, current: float, tolerance: float) -> str:
    if current < baseline - tolerance:
        return "regressed"
    if current > baseline + tolerance:
        return "improved"
    return "ok" if current == baseline else "changed"


def _one_or_many(values: set[str]) -> str:
    return ", ".join(repr(v) for v in sorted(values))


def check_same_sweep(
    baseline: dict[str, Any],
    cells: dict[str, dict[str, Any]],
    baseline_name: str = "the baseline",
    sweep_name: str = "the new sweep",
) -> None:
    """Refuse (BenchError, exit 2) a baseline recorded under another preset or protocol than
    the finished runs in ``cells``: their numbers differ by design (a ``smoke`` run is not a
    ``ci`` run), so every difference would be noise or every cell missing. Preset: a cell of
    both with another preset, or no preset in common; protocol (part of a cell's key): no
    protocol in common."""
    base = baseline["cells"]
    if not cells:
        return  # nothing finished: every baseline cell is missing (exit 1)
    fix = f"record a baseline of this sweep (bench regress record --out RUNS -o {baseline_name})"
    for what in ("preset", "protocol"):
        recorded = {c[what] for c in base.values() if isinstance(c.get(what), str)}
        ran = {c[what] for c in cells.values() if isinstance(c.get(what), str)}
        clash = [
            key
            for key, cell in cells.items()
            if key in base
            and isinstance(cell.get(what), str)
            and isinstance(base[key].get(what), str)
            and cell[what] != base[key][what]
        ]
        if clash or (ran and recorded and not recorded & ran):
            example = f" (e.g. cell {clash[0]})" if clash else ""
            raise BenchError(
                f"{baseline_name} was recorded under {what} {_one_or_many(recorded)}, the runs "
                f"in {sweep_name} under {what} {_one_or_many(ran)}{example}: a check compares "
                f"runs of the same {what}",
                hint=f"run the sweep with --{what} {sorted(recorded)[0]}, or {fix}",
            )


def compare(
    baseline: dict[str, Any],
    cells: dict[str, dict[str, Any]],
    tolerance: float = DEFAULT_TOLERANCE,
    unfinished: list[str] | None = None,
    noise_z: float = DEFAULT_NOISE_Z,
    baseline_name: str = "the baseline",
    sweep_name: str = "the new sweep",
) -> Comparison:
    """Every tracked metric of every baseline cell against the new sweep's ``cells``. The noise
    term of a metric uses the number of test images the new run measured it on (its own
    count), never the baseline's. Refused (BenchError): a baseline of another preset or
    protocol (:func:`check_same_sweep`), or a baseline cell without a metric its run measured
    (that metric would go unchecked)."""
    if tolerance < 0:
        raise BenchError(f"tolerance must be >= 0, not {tolerance}")
    check_same_sweep(baseline, cells, baseline_name, sweep_name)
    rerecord = f"record it again: bench regress record --out RUNS -o {baseline_name}"
    unchecked = [
        f"cell {key!r} has no {', '.join(sorted(lacks))}, which run "
        f"{cells[key].get('run_id', key)} measured"
        for key, base in baseline["cells"].items()
        if key in cells and (lacks := set(cells[key]["metrics"]) - set(base["metrics"]))
    ]
    if unchecked:
        more = f" (and {len(unchecked) - 3} more cells)" if len(unchecked) > 3 else ""
        raise BenchError(
            f"{baseline_name}: " + "; ".join(unchecked[:3]) + more + ": it would go unchecked",
            hint=rerecord,
        )
    out: list[Difference] = []
    recounted: list[str] = []
    uncounted: list[str] = []
    for key, base in baseline["cells"].items():
        now = cells.get(key)
        if now is None:
            out.append(Difference(key, "(cell)", None, None, "missing"))
            continue
        for metric, value in base["metrics"].items():
            current = now["metrics"].get(metric)
            if current is None:
                out.append(Difference(key, metric, value, None, "missing"))
                continue
            n = now.get("counts", {}).get(metric)  # the images this run measured it on
            recorded = base.get("counts", {}).get(metric)
            if n is None:
                uncounted.append(f"{key} {metric}")
            elif recorded != n:
                recounted.append(f"{key} {metric}: {recorded} in the baseline, {n} now")
            allowed = max(tolerance, noise(value, n, noise_z))
            out.append(Difference(key, metric, value, current, _status(value, current, allowed)))
    out += [
        Difference(key, "(cell)", None, None, "new")
        for key in cells
        if key not in baseline["cells"]
    ]
    notes = [f"not finished in the new sweep: {line}" for line in unfinished or []]
    if recounted:
        notes.append(
            f"{len(recounted)} metric(s) were measured on another number of test images than "
            f"{baseline_name} records (e.g. {recounted[0]}): the noise term uses the run's "
            "count; if the test set changed, record the baseline again"
        )
    if uncounted:
        notes.append(
            f"{len(uncounted)} metric(s) have no image count in their run (e.g. "
            f"{uncounted[0]}): checked against the plain --tolerance"
        )
    env, here = baseline.get("environment", {}), environment()
    for name in ("torch", "device", "machine"):
        if env.get(name) != here.get(name):
            notes.append(
                f"environment differs: {name} {env.get(name)} in the baseline, {here.get(name)} "
                "here; numbers may move for that reason alone (raise --tolerance or re-record)"
            )
    return Comparison(out, tolerance, notes, noise_z)
