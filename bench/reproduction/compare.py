"""Our runs against the paper, cell by cell: the flag rule, the reasons, the variants.

:func:`compare_frame` turns the rows of a reproduction CSV into one :class:`Comparison` per
(method, ratio): our mean ± std over seeds, the paper's, the difference, and a flag when the
difference is larger than ``max(MIN_GAP, combined std)``. Flagged cells carry a reason from an
explanations YAML (``results/reproduction/explanations.yaml``)::

    cells:
      cmnist:
        vanilla:
          all: why every ratio of this method differs
          1.0: why this ratio differs (wins over ``all``)
    notes:
      - text printed under the table of the generated README
"""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from debias_bench.errors import ConfigError
from debias_bench.reporting.layout import method_order
from debias_bench.reporting.paper import PaperNumbers, load_paper
from debias_bench.reporting.stats import combined_std, difference, seed_stats

from .export import TAIL_COLUMN

#: a cell is flagged when |ours - paper| exceeds max(MIN_GAP, combined std), in points
MIN_GAP = 2.0
UNEXPLAINED = "UNEXPLAINED"


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
    #: over the same runs, their ``last`` model (set where the cell's selection is another,
    #: e.g. the best-test numbers LC's and DeNetDM's codes print): shown, never compared
    last_mean: float | None = None
    last_std: float | None = None

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
    def flagged(self) -> bool:
        if self.ours_mean is None or self.paper_mean is None:
            return False
        return is_flagged(self.ours_mean, self.ours_std, self.paper_mean, self.paper_std)


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


def compare_frame(
    frame: pd.DataFrame,
    dataset: str,
    selection: str = "last",
    protocol: str = "official",
    preset: str = "paper",
    paper: PaperNumbers | None = None,
    explanations: dict[str, Any] | None = None,
    skip: Collection[str] = (),
    with_last: bool = False,
) -> list[Comparison]:
    """Every (method, ratio) the paper reports for ``dataset`` or we ran, but the methods in
    ``skip``, in the paper's method order then ratio; ours from the rows of ``selection``,
    ``protocol``, ``preset``; ``with_last``: each cell also carries its runs' ``last``
    numbers."""
    paper = paper or load_paper()
    explanations = explanations or {}
    rows = chosen_rows(frame, dataset, selection, protocol, preset)
    rows = rows[(rows["overrides"] == "") & ~rows["method"].isin(list(skip))]  # variants: apart
    keys = {(m, r) for d, r, m in paper.accuracy if d == dataset and m not in skip}
    keys |= {(m, float(r)) for m, r in zip(rows["method"], rows["ratio"], strict=True)}
    order = method_order([m for m, _ in keys])
    out = []
    for method, ratio in sorted(keys, key=lambda k: (order.index(k[0]), k[1])):
        runs = rows[(rows["method"] == method) & (rows["ratio"] == ratio)]
        mean, std, n = seed_stats(runs["accuracy"])
        paper_mean, paper_std = paper.accuracy.get((dataset, ratio, method), (None, None))
        cell = Comparison(method, ratio, mean, std, n, paper_mean, paper_std)
        tails = runs[TAIL_COLUMN].dropna()
        if selection == "last" and n and len(tails) == n:
            tail_mean, tail_std, _ = seed_stats(tails)
            cell = replace(cell, tail_mean=tail_mean, tail_std=tail_std)
        if with_last and selection != "last":
            last = chosen_rows(frame, dataset, "last", protocol, preset)
            last = last[
                (last["overrides"] == "") & (last["method"] == method) & (last["ratio"] == ratio)
            ]
            last_mean, last_std, _ = seed_stats(last["accuracy"])
            cell = replace(cell, last_mean=last_mean, last_std=last_std)
        if cell.flagged:
            reason = explanation(explanations, dataset, method, ratio) or UNEXPLAINED
            cell = replace(cell, reason=reason)
        out.append(cell)
    return out


#: references whose methods are compared with their own papers, each in a section of its own
#: beside the ETF-Debias paper's table (with the selection its numbers are comparable with)
OWN_PAPERS = ("lc_denetdm",)


@dataclass(frozen=True)
class Section:
    """The runs of one paper's methods against that paper."""

    paper: PaperNumbers
    selection: str
    cells: list[Comparison]


def sections(
    frame: pd.DataFrame,
    dataset: str,
    selection: str = "last",
    protocol: str = "official",
    preset: str = "paper",
    explanations: dict[str, Any] | None = None,
) -> list[Section]:
    """The ETF-Debias paper's comparison (under ``selection``, without the methods another
    paper of :data:`OWN_PAPERS` reports), then one section per such paper whose methods ran
    on ``dataset``, under that paper's selection."""
    main = load_paper()
    others = [load_paper(name) for name in OWN_PAPERS]
    theirs = set().union(*(paper.methods() for paper in others)) - main.methods()
    cells = compare_frame(frame, dataset, selection, protocol, preset, main, explanations, theirs)
    out = [Section(main, selection, cells)]
    ran = set(frame.loc[frame["dataset"] == dataset, "method"])
    for paper in others:
        if not ran & paper.methods(dataset):
            continue
        skip = set(ran | main.methods()) - paper.methods()
        cells = compare_frame(
            frame, dataset, paper.selection, protocol, preset, paper, explanations, skip, True
        )
        out.append(Section(paper, paper.selection, cells))
    return out
