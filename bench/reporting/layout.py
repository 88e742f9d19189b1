"""Where runs go in the report: the paper's tables, its column and row order, names and markers.

The paper declares all of it in its reference YAML (``results/reference/``: ``ours``,
``baseline``, ``methods``, ``datasets``, ``tables``), parsed here into a :class:`PaperLayout`.
A dataset outside the paper goes to the accuracy table of the ``kind`` it declares at
registration (``register_dataset(..., kind="real")``), or to the ``other`` table without one;
methods and datasets outside the paper follow the paper's in registration order.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from debias_bench.config.sampling import split_variant
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS, Registry
from debias_bench.reporting.paper import DEFAULT_PAPER, reference_data

#: a dataset's declared kind (``register_dataset(..., kind=...)``) -> the kind of its test set
KINDS = {"synthetic": "unbiased", "real": "conflicting"}
#: table layouts: rows dataset x ratio with the methods as columns; or one table per ratio with
#: the methods as rows and the classes of one dataset as columns
ACCURACY, PER_CLASS = "accuracy", "per_class"
BIAS_MARKERS = {True: "*", False: "◇"}


@dataclass(frozen=True)
class TableLayout:
    """One table of the report: its id (``bench report --table ID``), title and contents."""

    id: str
    title: str
    layout: str = ACCURACY
    label: str = ""  # the paper's name for it ("Table 1"); empty for a table of the harness
    kind: str | None = None  # accuracy: the declared dataset kind whose datasets it holds
    datasets: tuple[str, ...] = ()  # the paper's datasets in it
    classes: tuple[str, ...] = ()  # per_class: the paper's column order of the classes

    def heading(self, detail: str = "") -> str:
        """The title (``detail`` appended), naming the paper's table when it is one."""
        label = f" (the paper's {self.label})" if self.label else ""
        return f"{self.title}{detail}{label}"


#: the accuracy table of the datasets that no table of the paper takes
OTHER = TableLayout("other", "Debiasing performance on further datasets")


@dataclass(frozen=True)
class PaperLayout:
    """What a paper's tables look like (its reference YAML, less the numbers)."""

    ours: str | None  # the paper's method: its gain or loss is bracketed
    baseline: str  # plain training: the reference of the cost table
    methods: dict[str, str]  # registry name -> printed name, in the paper's column order
    datasets: dict[str, str]  # registry name -> printed name, in the paper's row order
    tables: tuple[TableLayout, ...]

    def table(self, table_id: str) -> TableLayout:
        for table in self.tables:
            if table.id == table_id:
                return table
        raise ConfigError(f"the paper has no table {table_id!r}")

    def of_layout(self, layout: str) -> list[TableLayout]:
        return [t for t in self.tables if t.layout == layout]


def _table(table_id: str, data: dict[str, Any], datasets: dict[str, str]) -> TableLayout:
    table = TableLayout(
        id=table_id,
        title=str(data["title"]),
        layout=str(data.get("layout", ACCURACY)),
        label=str(data.get("label", "")),
        kind=data.get("kind"),
        datasets=tuple(data.get("datasets", ())),
        classes=tuple(data.get("classes", ())),
    )
    where = f"reference table {table_id!r}"
    if table.layout not in (ACCURACY, PER_CLASS):
        raise ConfigError(f"{where}: layout {table.layout!r}", hint=f"{ACCURACY} or {PER_CLASS}")
    if table.kind is not None and table.kind not in KINDS:
        raise ConfigError(f"{where}: kind {table.kind!r}", hint=f"one of {', '.join(KINDS)}")
    if table.layout == PER_CLASS and len(table.datasets) != 1:
        raise ConfigError(f"{where}: a {PER_CLASS} table names exactly one dataset")
    strangers = [d for d in table.datasets if d not in datasets]
    if strangers:
        raise ConfigError(f"{where}: datasets {strangers} are not among the paper's `datasets`")
    return table


def parse_layout(data: dict[str, Any]) -> PaperLayout:
    datasets = {str(k): str(v) for k, v in (data.get("datasets") or {}).items()}
    return PaperLayout(
        ours=data.get("ours"),
        baseline=str(data["baseline"]),
        methods={str(k): str(v) for k, v in (data.get("methods") or {}).items()},
        datasets=datasets,
        tables=tuple(_table(k, v, datasets) for k, v in (data.get("tables") or {}).items()),
    )


@functools.cache
def reference_layout(name: str = DEFAULT_PAPER) -> PaperLayout:
    """The layout of the paper this harness reproduces (or of ``name``)."""
    return parse_layout(reference_data(name))


# ------------------------------------------------------------------------- order and names
def _ordered(names: Iterable[str], paper: Iterable[str], registry: Registry[Any]) -> list[str]:
    """The paper's order, then registration order, then by name."""
    first = tuple(paper)
    order = (*first, *(n for n in registry.names() if n not in first))
    return sorted(
        dict.fromkeys(names), key=lambda n: (order.index(n) if n in order else len(order), n)
    )


def method_order(names: list[str]) -> list[str]:
    """The paper's column order, then registry order, then by name; a method's declared variant
    (``groupdro[sampling=loss_weights]``) right after the method."""
    bases = _ordered([split_variant(n)[0] for n in names], reference_layout().methods, METHODS)
    return sorted(dict.fromkeys(names), key=lambda n: (bases.index(split_variant(n)[0]), n))


def dataset_order(names: list[str]) -> list[str]:
    """The paper's row order, then registry order (plugins as registered), then by name."""
    return _ordered(names, reference_layout().datasets, DATASETS)


def method_name(method: str) -> str:
    """The registered display name; the paper's while the method is not registered here; a
    declared variant named after it: ``GroupDRO [sampling=loss_weights]``."""
    method, variant = split_variant(method)
    if method in METHODS:
        name = METHODS.entry(method).display_name
    else:
        name = reference_layout().methods.get(method, method)
    return name if variant is None else f"{name} [{variant}]"


def dataset_name(dataset: str) -> str:
    if dataset in DATASETS:
        return DATASETS.entry(dataset).display_name
    return reference_layout().datasets.get(dataset, dataset)


def bias_marker(method: str) -> str | None:
    """The paper's marker: * for methods trained with bias labels, ◇ for methods without."""
    method = split_variant(method)[0]
    if method not in METHODS:
        return None
    needs = METHODS.entry(method).meta.get("needs_bias_labels")
    return None if needs is None else BIAS_MARKERS[bool(needs)]


def dataset_spec(dataset: str) -> Any | None:
    """The registered dataset's spec, or None while the dataset is not registered."""
    if dataset not in DATASETS:
        return None
    return getattr(DATASETS.get(dataset), "spec", None)


# ------------------------------------------------------------------------- tables of datasets
def declared_kind(dataset: str) -> str | None:
    """The kind a registered dataset declares (checked), else None."""
    if dataset not in DATASETS:
        return None
    kind = DATASETS.entry(dataset).meta.get("kind")
    if kind is not None and kind not in KINDS:
        raise ConfigError(
            f"dataset {dataset!r} declares kind={kind!r}",
            hint=f"kind is one of {', '.join(KINDS)} (or left out: 'other' table)",
        )
    return kind


def table_of(dataset: str) -> str:
    """Which accuracy table a dataset's rows go to: the paper's table of its declared kind
    (``kind="synthetic"``: Table 1, an unbiased test set; ``kind="real"``: Table 2, a
    bias-conflicting test set); the paper's datasets by name while not registered (or
    registered without a kind); ``other`` for any other dataset."""
    kind = declared_kind(dataset)
    for table in reference_layout().of_layout(ACCURACY):
        if (table.kind == kind) if kind is not None else (dataset in table.datasets):
            return table.id
    return OTHER.id


def kind_of_test_set(dataset: str) -> str:
    """``unbiased`` or ``conflicting``: the registered spec's, else that of its kind."""
    declared = getattr(dataset_spec(dataset), "test_kind", None)
    if declared:
        return str(declared)
    kind = declared_kind(dataset)
    if kind is None:
        tables = [t for t in reference_layout().of_layout(ACCURACY) if dataset in t.datasets]
        kind = tables[0].kind if tables else None
    return KINDS.get(kind or "", "unbiased")
