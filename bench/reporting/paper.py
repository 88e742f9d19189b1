"""The paper's reference, shipped in ``results/reference/`` (package data): one YAML per paper.

It holds the paper's published numbers (parsed here into :class:`PaperNumbers`; cells are
``[mean, std]`` in percent as printed, ``std`` null where the paper prints none) and what its
tables look like (parsed by :mod:`debias_bench.reporting.layout`). Keys are the registry's
dataset and method names, so a paper's numbers line up with our runs directly.

A reference may gather methods from several papers (``sources``: method -> its paper, table and
metric; ``results/reference/lc_denetdm.yaml``), and references combine: ``--paper A+B`` reads
A's numbers and adds B's cells where A has none (``load_paper``), each source named.

Besides the test accuracy (``accuracy``, compared by the accuracy tables and the ``subpop``
table's average), a reference may give the worst-group test accuracy (``worst_group``, compared
by the ``subpop`` table) and Waterbirds' adjusted average (``adjusted_average``: the test groups
weighted by the training groups, which Sagawa et al. and DFR call the average; compared by the
``subpop`` table's adjusted-average column, never with our test accuracy), each keyed like
``accuracy`` (``results/reference/subpop_waterbirds_celeba.yaml``).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from debias_bench.errors import ConfigError

#: the paper this harness reproduces: its layout shapes every report, its numbers are compared
DEFAULT_PAPER = "etf_debias_cvpr2024"
#: the repository copy, used when the package data is not installed (an editable checkout)
_REPO_REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"

Stat = tuple[float, float | None]
#: (dataset, ratio, method)
CellKey = tuple[str, float, str]


@dataclass
class PaperNumbers:
    """The numbers a paper printed, with where they come from and how they were produced."""

    name: str
    source: str
    protocol: str
    statistic: str
    accuracy: dict[CellKey, Stat] = field(default_factory=dict)
    per_class: dict[tuple[str, float, str, str], Stat] = field(default_factory=dict)
    #: worst-group test accuracy (the ``subpop`` table's worst-group column)
    worst_group: dict[CellKey, Stat] = field(default_factory=dict)
    #: Waterbirds' adjusted average, kept apart from ``accuracy`` (not our test accuracy): the
    #: ``subpop`` table's adjusted-average column
    adjusted_average: dict[CellKey, Stat] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    #: method -> the paper its numbers come from, where it is not ``source``
    sources: dict[str, str] = field(default_factory=dict)
    #: our selection rule whose number is the one comparable with the paper's
    selection: str = "last"

    def methods(self, dataset: str | None = None) -> set[str]:
        """The methods with a number in the paper (on ``dataset``, if given)."""
        return {m for d, _, m in self.accuracy if dataset is None or d == dataset}

    def cells(self) -> dict[str, dict[CellKey, Stat]]:
        """Each metric of (dataset, ratio, method) cells, by its YAML key."""
        return {
            "accuracy": self.accuracy,
            "worst_group": self.worst_group,
            "adjusted_average": self.adjusted_average,
        }

    def short_source(self) -> str:
        """The paper, and each other paper that some of the methods' numbers come from."""
        methods = {key[2] for cells in self.cells().values() for key in cells}
        methods |= {key[2] for key in self.per_class}
        own = [self.source.split(" (")[0]] if methods - set(self.sources) else []
        others = sorted(set(self.sources.values()))
        by = {s: sorted(m for m, src in self.sources.items() if src == s) for s in others}
        return "; ".join([*own, *(f"{', '.join(by[s])}: {s.split(' (')[0]}" for s in others)])


def _reference_dir() -> Any:
    try:
        return resources.files("debias_bench.reference")
    except ModuleNotFoundError:
        return _REPO_REFERENCE


def available_papers() -> list[str]:
    return sorted(p.name[:-5] for p in _reference_dir().iterdir() if p.name.endswith(".yaml"))


def _reference_text(name: str) -> str:
    path = _reference_dir().joinpath(f"{name}.yaml")
    if not path.is_file():
        raise ConfigError(
            f"no reference numbers named {name!r}",
            hint=f"available: {', '.join(available_papers()) or 'none'}",
        )
    return path.read_text()


def parse_paper(data: dict[str, Any]) -> PaperNumbers:
    paper = PaperNumbers(
        name=data["paper"],
        source=data["source"],
        protocol=data.get("protocol", "official"),
        statistic=data.get("statistic", ""),
        notes=list(data.get("notes", [])),
        sources={str(m): str(s) for m, s in (data.get("sources") or {}).items()},
        selection=str(data.get("selection", "last")),
    )
    for metric, cells in paper.cells().items():
        for dataset, ratios in (data.get(metric) or {}).items():
            for ratio, methods in ratios.items():
                for method, (mean, std) in methods.items():
                    cells[(dataset, float(ratio), method)] = (float(mean), _std(std))
    for dataset, ratios in data.get("per_class", {}).items():
        for ratio, methods in ratios.items():
            for method, classes in methods.items():
                for cls, (mean, std) in classes.items():
                    key = (dataset, float(ratio), method, cls)
                    paper.per_class[key] = (float(mean), _std(std))
    return paper


def _std(value: Any) -> float | None:
    return None if value is None else float(value)


@functools.cache
def reference_data(name: str = DEFAULT_PAPER) -> dict[str, Any]:
    """A paper's reference YAML, parsed once per process (read it, never change it)."""
    data = yaml.safe_load(_reference_text(name))
    if not isinstance(data, dict):
        raise ConfigError(f"reference {name!r} is not a YAML mapping")
    return data


def load_paper(name: str = DEFAULT_PAPER) -> PaperNumbers:
    """A reference's numbers; ``A+B``: A's, with B's cells added where A has none (B's methods
    keep B's sources, a method with cells from both names both papers, and B's notes follow
    A's)."""
    first, *more = name.split("+")
    paper = parse_paper(reference_data(first))
    for other in more:
        extra = parse_paper(reference_data(other))
        had = {k[2] for cells in paper.cells().values() for k in cells}
        had |= {k[2] for k in paper.per_class}
        added = {k[2] for k in extra.per_class if k not in paper.per_class}
        for metric, cells in extra.cells().items():
            into = paper.cells()[metric]
            added |= {k[2] for k in cells if k not in into}
            for key, stat in cells.items():
                into.setdefault(key, stat)
        for pkey, stat in extra.per_class.items():
            paper.per_class.setdefault(pkey, stat)
        for method in added:
            theirs = extra.sources.get(method, extra.source)
            mine = paper.sources.get(method, paper.source)
            if method in had and mine != theirs:  # some of its cells are A's, some B's
                theirs = f"{mine.split(' (')[0]} and {theirs.split(' (')[0]}"
            paper.sources[method] = theirs
        paper.notes += extra.notes
        if added and extra.statistic:
            paper.statistic += f"; {', '.join(sorted(added))}: {extra.statistic}"
    return paper
