"""The committed reproduction: finished runs exported to a CSV, compared with the paper.

``export_frame`` reads a run store (never writes to it) and returns one row per done run and
selection (test split) with the columns of :data:`COLUMNS`; ``compare_frame`` turns such a CSV
into one row per (method, ratio): our mean ± std over seeds, the paper's, the difference, and a
flag when the difference is larger than ``max(MIN_GAP, combined std)``. Flagged cells carry a
reason from an explanations YAML (``results/reproduction/explanations.yaml``)::

    cells:
      cmnist:
        vanilla:
          all: why every ratio of this method differs
          1.0: why this ratio differs (wins over ``all``)
    notes:
      - text printed under the table of the generated README
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from debias_bench.config import OFF_RECIPE_LAYERS, RunConfig
from debias_bench.dataset_facts import off_recipe_data_options
from debias_bench.errors import ConfigError
from debias_bench.reporting.layout import method_name, method_order
from debias_bench.reporting.paper import PaperNumbers, load_paper
from debias_bench.reporting.records import run_rows
from debias_bench.reporting.stats import STATISTIC, combined_std, difference, seed_stats
from debias_bench.states import RunState
from debias_bench.store import RunDir, RunStore

COLUMNS = [
    "method",
    "dataset",
    "ratio",
    "seed",
    "protocol",
    "preset",
    "overrides",
    "selection",
    "accuracy",
    "aligned_accuracy",
    "conflicting_accuracy",
    "worst_group_accuracy",
    "last10_accuracy",
    "epochs",
    "train_time_s",
    "device",
    "code_version",
]
#: evaluations at the end of a run that ``last10_accuracy`` averages (test accuracy)
TAIL = 10
#: a cell is flagged when |ours - paper| exceeds max(MIN_GAP, combined std), in points
MIN_GAP = 2.0
UNEXPLAINED = "UNEXPLAINED"
VARIANTS_HEADING = "Runs off the recipe (evidence for the reasons; not compared with the paper)"


# --------------------------------------------------------------------------- export
def export_frame(
    store: RunStore, dataset: str | None = None, stale: bool = False
) -> tuple[pd.DataFrame, list[str]]:
    """(rows of the done runs, ids of the runs that are not done) of ``store``.

    One row per done run and selection, test split only, sorted for a stable diff. With
    ``stale``, runs that finished under older code of their method or dataset are exported
    too, under the code version that trained them (``code_version``)."""
    rows: list[dict[str, Any]] = []
    run_ids: list[str] = []  # the run of each row
    unfinished: list[str] = []
    exported = (RunState.DONE.value, RunState.STALE.value) if stale else (RunState.DONE.value,)
    for run_dir in store.runs():
        records = run_rows(run_dir, stale_results=stale)
        if not records or (dataset and records[0].get("dataset") != dataset):
            continue
        if records[0]["state"] not in exported or records[0].get("selection") is None:
            unfinished.append(f"{run_dir.run_id} ({records[0]['state']})")
            continue
        result = run_dir.result() or {}
        off_recipe = overrides(run_dir.config())
        tail = tail_accuracy(run_dir.metrics())
        for record in records:
            if record["split"] != "test":
                continue
            row = {k: record.get(k) for k in COLUMNS}
            row["overrides"] = off_recipe
            row["last10_accuracy"] = tail
            row["epochs"] = result.get("epochs")
            row["code_version"] = code_version(run_dir, result)
            rows.append(row)
            run_ids.append(run_dir.run_id)
    frame = pd.DataFrame(rows, columns=COLUMNS)
    _check_one_run_per_row(frame, run_ids)
    frame = frame.sort_values(SORT, kind="stable")
    return frame.reset_index(drop=True), sorted(unfinished)


def _check_one_run_per_row(frame: pd.DataFrame, run_ids: list[str]) -> None:
    """A ConfigError when two runs export as the same row (:data:`ROW_KEY`), so that the table
    would count one seed twice: two configurations that differ only where the export does not
    look (a build option given at its default, a run of older code beside its rerun)."""
    owners: dict[tuple[str, ...], str] = {}
    keys = frame[ROW_KEY].astype(str).itertuples(index=False)
    for key, run_id in zip(keys, run_ids, strict=True):
        other = owners.setdefault(tuple(key), run_id)
        if other != run_id:
            raise ConfigError(
                f"runs {other} and {run_id} export as the same row "
                f"({', '.join(f'{k}={v}' for k, v in zip(ROW_KEY, key, strict=True))})",
                hint="compare their config.json; move one out of the store, or export them "
                "from separate --out folders",
            )


def tail_accuracy(evaluations: list[dict[str, Any]]) -> float | None:
    """The mean test accuracy of a run's last :data:`TAIL` evaluations (None with fewer): what
    its ``last`` number would be without the noise of one evaluation, such as a one-epoch dip
    under a growing learning rate."""
    values = [e["test"]["accuracy"] for e in evaluations if "accuracy" in (e.get("test") or {})]
    return sum(values[-TAIL:]) / TAIL if len(values) >= TAIL else None


def code_version(run_dir: RunDir, result: dict[str, Any]) -> str | None:
    """``0.1.0+g<commit>``: the package version and the commit of the code that trained the
    run (recorded in its status at its last start; before that was recorded, the provenance of
    the code that planned it, in its config), or the version alone where neither knows it."""
    version = result.get("code_version")
    commit = None
    for read in (run_dir.status, run_dir.config):
        with contextlib.suppress(Exception):  # an unreadable file: the next, or the version
            commit = commit or (read().get("provenance") or {}).get("git_commit")
    return f"{version}+g{commit[:10]}" if version and commit else version


def overrides(config: dict[str, Any]) -> str:
    """The settings a run took from outside its recipe and preset (``--set``, ``--epochs``, a
    tuned file) as sorted ``key=value`` pairs, then the build options that give it other data
    than its recipe's (``--data-option``, ``--data-seed``) as ``data:key=value``; ``""`` for a
    run of the recipe. Speed-only settings (left out of the run id) do not count."""
    hparams = config.get("hparams") or {}
    try:
        counted = RunConfig.from_json(config).identity()["hparams"]
    except Exception:  # a method this process does not know: every setting counts
        counted = hparams
    sources = config.get("sources") or {}
    keys = sorted(k for k, src in sources.items() if src in OFF_RECIPE_LAYERS and k in counted)
    pairs = [f"{k}={_value(hparams.get(k))}" for k in keys]
    data = off_recipe_data(config)
    pairs += [f"data:{k}={_value(data[k])}" for k in sorted(data)]
    return ", ".join(pairs)


def off_recipe_data(config: dict[str, Any]) -> dict[str, Any]:
    """The recorded build options of a run that differ from its preset's recipe."""
    options = config.get("data_options") or {}
    try:
        return off_recipe_data_options(config.get("preset", "paper"), config["dataset"], options)
    except Exception:  # a dataset this process does not know: all but the default data seed
        return {k: v for k, v in options.items() if (k, v) != ("data_seed", 0)}


def _value(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))


#: columns added after the first exports (read as empty from those: ``overrides`` came after
#: exports that only ever held runs of the recipe)
LATER_COLUMNS: dict[str, Any] = {
    "worst_group_accuracy": float("nan"),
    "overrides": "",
    "last10_accuracy": float("nan"),
}
#: what identifies a row of the export: one run's one selection
ROW_KEY = ["method", "dataset", "ratio", "seed", "protocol", "preset", "overrides", "selection"]
SORT = ["dataset", "method", "ratio", "seed", "overrides", "selection"]


def merge_frames(kept: pd.DataFrame, new: pd.DataFrame) -> pd.DataFrame:
    """``kept`` (an earlier export) with ``new``'s rows added; a row of ``new`` replaces the
    row of ``kept`` with the same :data:`ROW_KEY` (the reproduction spans run stores of
    several sessions). Columns an earlier export lacks stay empty for its rows."""
    key = ROW_KEY
    new_keys = set(map(tuple, new[key].astype(str).itertuples(index=False)))
    old_keys = kept[key].astype(str).itertuples(index=False)
    keep = kept[[tuple(k) not in new_keys for k in old_keys]]
    frame = pd.concat([keep, new], ignore_index=True).reindex(columns=COLUMNS)
    frame = frame.sort_values(SORT, kind="stable")
    return frame.reset_index(drop=True)


def write_csv(frame: pd.DataFrame, path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_csv(path, index=False, float_format="%.4f")


def read_csv(path: Path) -> pd.DataFrame:
    if not path.is_file():
        raise ConfigError(f"no reproduction CSV at {path}", hint="bench reproduce export first")
    frame = pd.read_csv(path)
    for column, empty in LATER_COLUMNS.items():  # exports written before these columns were
        if column not in frame.columns:
            frame[column] = empty
    # an all-empty column reads as floats (NaN): the recipe
    frame["overrides"] = [v if isinstance(v, str) else "" for v in frame["overrides"]]
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise ConfigError(
            f"{path} lacks the columns {', '.join(missing)}",
            hint="write it with `bench reproduce export`",
        )
    frame["ratio"] = frame["ratio"].astype(float)
    return frame


# --------------------------------------------------------------------------- comparison
@dataclass(frozen=True)
class Comparison:
    """One (method, ratio) cell of ours against the paper."""

    method: str
    ratio: float
    ours_mean: float | None
    ours_std: float | None
    n: int
    paper_mean: float | None
    paper_std: float | None
    reason: str = ""
    #: over the same runs, each one's mean of its last TAIL evaluations (``last`` only; None
    #: unless every run of the cell has it)
    tail_mean: float | None = None
    tail_std: float | None = None

    @property
    def diff(self) -> float | None:
        return difference(self.ours_mean, self.paper_mean)

    @property
    def tail_disagrees(self) -> bool:
        """Whether the flag rule decides otherwise on the runs' last-evaluations means: the
        cell's ``last`` number sits on an end-of-run dip or spike of some run."""
        if self.tail_mean is None or self.paper_mean is None:
            return False
        tail_flagged = is_flagged(self.tail_mean, self.tail_std, self.paper_mean, self.paper_std)
        return tail_flagged != self.flagged

    @property
    def tolerance(self) -> float:
        return max(MIN_GAP, combined_std(self.ours_std, self.paper_std))

    @property
    def flagged(self) -> bool:
        return self.diff is not None and abs(self.diff) > self.tolerance + 1e-9


def is_flagged(ours: float, ours_std: float | None, paper: float, paper_std: float | None) -> bool:
    """The flagging rule on its own: |ours - paper| > max(MIN_GAP, combined std)."""
    return abs(ours - paper) > max(MIN_GAP, combined_std(ours_std, paper_std)) + 1e-9


def load_explanations(path: Path | None) -> dict[str, Any]:
    if path is None or not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping with 'cells' and 'notes'")
    return data


def explanation(explanations: dict[str, Any], dataset: str, method: str, ratio: float) -> str:
    """The reason for a cell: its ratio's entry, else the method's ``all`` entry."""
    per_method = ((explanations.get("cells") or {}).get(dataset) or {}).get(method) or {}
    for key, text in per_method.items():
        if key != "all" and math.isclose(float(key), ratio):
            return str(text).strip()
    return str(per_method.get("all", "")).strip()


def chosen_rows(
    frame: pd.DataFrame, dataset: str, selection: str, protocol: str, preset: str
) -> pd.DataFrame:
    """The rows of ``dataset`` under one selection, protocol and preset."""
    return frame[
        (frame["dataset"] == dataset)
        & (frame["selection"] == selection)
        & (frame["protocol"] == protocol)
        & (frame["preset"] == preset)
    ]


@dataclass(frozen=True)
class Variant:
    """Runs of one method and ratio with settings off its recipe (``overrides``): evidence
    for a departure, never compared with the paper."""

    method: str
    ratio: float
    overrides: str
    mean: float | None
    std: float | None
    n: int


def variants(
    frame: pd.DataFrame, dataset: str, selection: str, protocol: str, preset: str
) -> list[Variant]:
    """The runs off the recipe, one entry per method, ratio and set of overrides."""
    rows = chosen_rows(frame, dataset, selection, protocol, preset)
    rows = rows[rows["overrides"] != ""]
    order = method_order(sorted(set(rows["method"])))
    out = []
    for key, group in rows.groupby(["method", "ratio", "overrides"]):
        method, ratio, changed = (str(part) for part in key)
        mean, std, n = seed_stats(group["accuracy"])
        out.append(Variant(method, float(ratio), changed, mean, std, n))
    return sorted(out, key=lambda v: (order.index(v.method), v.ratio, v.overrides))


def render_variants(found: list[Variant]) -> str:
    """The runs off the recipe as a Markdown table."""
    lines = [
        "| method | ratio (%) | settings off the recipe | ours | n |",
        "|---|---:|---|---:|---:|",
    ]
    for v in found:
        lines.append(
            f"| {method_name(v.method)} | {v.ratio:g} | `{v.overrides}` | "
            f"{_stat(v.mean, v.std)} | {v.n} |"
        )
    return "\n".join(lines)


def compare_frame(
    frame: pd.DataFrame,
    dataset: str,
    selection: str = "last",
    protocol: str = "official",
    preset: str = "paper",
    paper: PaperNumbers | None = None,
    explanations: dict[str, Any] | None = None,
) -> list[Comparison]:
    """Every (method, ratio) the paper reports for ``dataset`` or we ran, in the paper's
    method order then ratio; ours from the rows of ``selection``, ``protocol``, ``preset``."""
    paper = paper or load_paper()
    explanations = explanations or {}
    rows = chosen_rows(frame, dataset, selection, protocol, preset)
    rows = rows[rows["overrides"] == ""]  # the recipe's runs: variants are not compared
    keys = {(m, r) for d, r, m in paper.accuracy if d == dataset}
    keys |= {(m, float(r)) for m, r in zip(rows["method"], rows["ratio"], strict=True)}
    order = method_order([m for m, _ in keys])
    out = []
    for method, ratio in sorted(keys, key=lambda k: (order.index(k[0]), k[1])):
        runs = rows[(rows["method"] == method) & (rows["ratio"] == ratio)]
        mean, std, n = seed_stats(runs["accuracy"])
        paper_mean, paper_std = paper.accuracy.get((dataset, ratio, method), (None, None))
        cell = Comparison(method, ratio, mean, std, n, paper_mean, paper_std)
        tails = runs["last10_accuracy"].dropna()
        if selection == "last" and n and len(tails) == n:
            tail_mean, tail_std, _ = seed_stats(tails)
            cell = replace(cell, tail_mean=tail_mean, tail_std=tail_std)
        if cell.flagged:
            reason = explanation(explanations, dataset, method, ratio) or UNEXPLAINED
            cell = replace(cell, reason=reason)
        out.append(cell)
    return out


# --------------------------------------------------------------------------- rendering
def _stat(mean: float | None, std: float | None) -> str:
    if mean is None:
        return "–"
    return f"{mean:.2f}" if std is None else f"{mean:.2f} ± {std:.2f}"


def reason_notes(cells: list[Comparison]) -> list[str]:
    """The distinct reasons of the flagged cells, in table order (numbered in the table)."""
    notes: list[str] = []
    for c in cells:
        if c.flagged and c.reason not in notes:
            notes.append(c.reason)
    return notes


#: marks a cell whose flag the runs' last-evaluations means would decide otherwise
DIP_MARK = "†"


def tail_note(cells: list[Comparison]) -> str:
    """The cells marked :data:`DIP_MARK`, with the numbers that decide otherwise ("" if none)."""
    marked = [c for c in cells if c.tail_disagrees]
    if not marked:
        return ""
    listed = "; ".join(
        f"{method_name(c.method)} {c.ratio:g} %: {_stat(c.tail_mean, c.tail_std)} "
        f"({'within' if c.flagged else 'flagged'})"
        for c in marked
    )
    return (
        f"{DIP_MARK} The flag rule decides otherwise on the mean of each run's last {TAIL} "
        f"evaluations (`last10_accuracy`), so the `last` number sits on one evaluation's dip "
        f"or spike: {listed}."
    )


def render_table(cells: list[Comparison], numbered: bool = False) -> str:
    """The comparison as a GitHub Markdown table; flagged differences marked ``⚑``. With
    ``numbered``, a flagged cell's reason is a reference ``(k)`` to :func:`reason_notes`."""
    notes = reason_notes(cells)
    head = "| method | ratio (%) | ours | n | paper | ours − paper | flag | reason |"
    lines = [head, "|---|---:|---:|---:|---:|---:|:---:|---|"]
    for c in cells:
        diff = "–" if c.diff is None else f"{c.diff:+.2f}"
        ours = _stat(c.ours_mean, c.ours_std) if c.n else "not run"
        flag = ("⚑" if c.flagged else "") + (DIP_MARK if c.tail_disagrees else "")
        reason = f"({notes.index(c.reason) + 1})" if numbered and c.flagged else c.reason
        lines.append(
            f"| {method_name(c.method)} | {c.ratio:g} | {ours} | {c.n} | "
            f"{_stat(c.paper_mean, c.paper_std)} | {diff} | {flag} | {reason} |"
        )
    return "\n".join(lines)


def caption(frame: pd.DataFrame, dataset: str, selection: str, protocol: str, preset: str) -> str:
    devices = ", ".join(sorted({str(d) for d in frame["device"].dropna()})) or "–"
    versions = ", ".join(sorted({str(v) for v in frame["code_version"].dropna()})) or "–"
    return (
        f"{dataset}, selection `{selection}`, protocol `{protocol}`, preset `{preset}`; ours: "
        f"{STATISTIC}; paper: as printed (three trials). Flag ⚑: |ours − paper| > "
        f"max({MIN_GAP:g} points, sqrt(std_ours² + std_paper²)). Device: {devices}; "
        f"code version: {versions}."
    )


def render_readme(
    frame: pd.DataFrame,
    cells: list[Comparison],
    dataset: str,
    selection: str,
    protocol: str,
    preset: str,
    explanations: dict[str, Any],
    csv_name: str,
    expected_seeds: int = 3,
    now: datetime | None = None,
) -> str:
    """results/reproduction/README.md: the table, the incomplete cells and the notes."""
    now = now or datetime.now(UTC)
    short: dict[tuple[str, int], list[str]] = {}
    for c in cells:
        if c.n < expected_seeds and c.paper_mean is not None:
            short.setdefault((c.method, c.n), []).append(f"{c.ratio:g}")
    incomplete = [
        f"{method_name(method)}: {n} of {expected_seeds} seeds at {', '.join(ratios)} %"
        for (method, n), ratios in short.items()
    ]
    flagged = [c for c in cells if c.flagged]
    parts = [
        f"# Reproduction: {dataset} against the ETF-Debias paper",
        "",
        f"Generated {now:%Y-%m-%d %H:%M} UTC by `bench reproduce table {csv_name} --readme` "
        f"from `{csv_name}` ({len(frame)} rows: one per done run and selection).",
        "",
        caption(frame, dataset, selection, protocol, preset),
        "",
        render_table(cells, numbered=True),
        "",
        f"{len(flagged)} of {sum(c.diff is not None for c in cells)} compared cells flagged.",
    ]
    dips = tail_note(cells)
    if dips:
        parts += ["", dips]
    reasons = reason_notes(cells)
    if reasons:
        parts += ["", "Reasons for the flagged cells:", ""]
        parts += [f"{k}. {text}" for k, text in enumerate(reasons, 1)]
    found = variants(frame, dataset, selection, protocol, preset)
    if found:
        parts += ["", f"{VARIANTS_HEADING}:", "", render_variants(found)]
    if incomplete:
        parts += ["", "Cells without all seeds (running, failed or not run yet):", ""]
        parts += [f"- {line}" for line in incomplete]
    notes = explanations.get("notes") or []
    if notes:
        parts += ["", "## Notes", ""]
        parts += [f"- {str(note).strip()}" for note in notes]
    return "\n".join(parts) + "\n"
