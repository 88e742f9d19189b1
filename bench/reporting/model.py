"""The table model: what a table says, before any renderer decides how it looks.

Renderers (LaTeX, Markdown, CSV) only format what is here; every number, every bold mark and
every bracket is decided by the builders (:mod:`.accuracy`, :mod:`.classwise`, :mod:`.cost`, ...).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from debias_bench.reporting.ranks import RankTest


@dataclass
class Cell:
    """One table cell: a mean +- std over ``n`` seeds, or the reason it is empty.

    ``delta`` is the ``--ours`` method's gain (>0) or loss (<0) against the best other method
    of the row; ``flag`` marks a paper comparison whose difference exceeds the combined std;
    ``ratio`` is a cost relative to the paper's baseline (Vanilla); ``unit`` follows the mean
    (" s", " MB"). With ``bench report --interval``: ``low``/``high`` bound the interval of the
    mean over seeds, ``tie`` marks a cell not distinguishable from its row's best at the
    report's level, ``p`` is its test's Holm-corrected p-value against that best (None: the
    best itself, or too few seeds to test).
    """

    mean: float | None = None
    std: float | None = None
    n: int = 0
    expected_n: int = 0
    missing: str | None = None  # why there is no number: not run, running, failed, ...
    bold: bool = False
    delta: float | None = None
    flag: bool = False
    ratio: float | None = None
    signed: bool = False  # print the mean with its sign (a difference row)
    digits: int = 2
    low: float | None = None
    high: float | None = None
    tie: bool = False
    p: float | None = None

    @property
    def has_value(self) -> bool:
        return self.mean is not None

    @property
    def show_n(self) -> bool:
        return self.has_value and self.n < self.expected_n


#: the mark on a column trained on other terms than the table's reference column
#: (:mod:`debias_bench.reporting.terms`)
TERMS_MARK = "‡"


@dataclass(frozen=True)
class Column:
    key: str  # method name, class name, or "average"
    label: str  # what the header prints
    marker: str | None = None  # "*" (uses bias labels), "◇" (does not), None
    #: the column's terms where they differ from the table's reference column (its header then
    #: carries :data:`TERMS_MARK` and the caption names the difference), else ""
    terms: str = ""

    @property
    def terms_mark(self) -> str:
        return TERMS_MARK if self.terms else ""


@dataclass
class Row:
    """One row; ``labels`` fill the row-header columns, ``kind`` says what the numbers are."""

    labels: tuple[str, ...]
    cells: dict[str, Cell]
    kind: str = "ours"  # "ours" | "paper" | "diff" | "cost"
    group: str = ""  # rows of one group (a dataset) are set off by a rule in LaTeX


@dataclass
class Table:
    name: str  # the registered table that built it: "synthetic", "bar-classwise", "cost", ...
    title: str
    caption: str
    row_headers: tuple[str, ...]
    columns: list[Column]
    rows: list[Row]
    notes: list[str] = field(default_factory=list)
    #: lines about the table's numbers, under their own heading (``subpop``: the worst group
    #: of each row), printed before the runs not in the table (``notes``)
    remarks: list[str] = field(default_factory=list)
    remarks_title: str = ""
    #: column keys set apart from the others (the paper's "Average" column)
    separated: tuple[str, ...] = ()
    #: protocol, preset, selection, split, metric: also columns of the CSV
    meta: dict[str, str] = field(default_factory=dict)
    #: how LaTeX prints a row label that is a registry key (``cmnist`` -> ``Colored MNIST``)
    display: dict[str, str] = field(default_factory=dict)
    #: average ranks of the methods over the table's cells, Friedman and Nemenyi (``--interval``)
    ranks: RankTest | None = None
