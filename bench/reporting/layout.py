"""The paper's layouts: which datasets go in which table, column order, names and markers."""

from __future__ import annotations

from typing import Any

from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS, PAPER_DATASET_ORDER, PAPER_METHOD_ORDER

#: Column order of the paper's tables; methods not listed follow in registry order.
PAPER_ORDER = PAPER_METHOD_ORDER
SYNTHETIC = ("cmnist", "cifar10c")  # Table 1
REAL = ("bffhq", "dogs_and_cats", "bar")  # Table 2
DATASET_ORDER = PAPER_DATASET_ORDER
assert (*SYNTHETIC, *REAL) == DATASET_ORDER
#: BAR's actions in the column order of Tables D.1 and D.2
BAR_PAPER_CLASSES = ("climbing", "diving", "fishing", "vaulting", "racing", "throwing")

#: Names used while a method or dataset is not registered (yet) in this installation.
_METHOD_NAMES = {
    "vanilla": "Vanilla",
    "lff": "LfF",
    "lff_be": "LfF+BE",
    "end": "EnD",
    "sd": "SD",
    "disent": "DisEnt",
    "selecmix": "SelecMix",
    "etf_debias": "ETF-Debias",
}
_DATASET_NAMES = {
    "cmnist": "Colored MNIST",
    "cifar10c": "Corrupted CIFAR-10",
    "bffhq": "Biased FFHQ",
    "dogs_and_cats": "Dogs & Cats",
    "bar": "BAR",
}
BIAS_MARKERS = {True: "*", False: "◇"}


def method_order(names: list[str]) -> list[str]:
    """The paper's column order, then registry order, then by name."""
    names = list(dict.fromkeys(names))
    registered = [n for n in METHODS.names() if n not in PAPER_ORDER]
    order = (*PAPER_ORDER, *registered)
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def dataset_order(names: list[str]) -> list[str]:
    """The paper's row order, then registry order (plugins as registered), then by name."""
    names = list(dict.fromkeys(names))
    registered = [n for n in DATASETS.names() if n not in DATASET_ORDER]
    order = (*DATASET_ORDER, *registered)
    return sorted(names, key=lambda n: (order.index(n) if n in order else len(order), n))


def method_name(method: str) -> str:
    if method in METHODS:
        return METHODS.entry(method).display_name
    return _METHOD_NAMES.get(method, method)


def dataset_name(dataset: str) -> str:
    if dataset in DATASETS:
        return DATASETS.entry(dataset).display_name
    return _DATASET_NAMES.get(dataset, dataset)


def bias_marker(method: str) -> str | None:
    """The paper's marker: * for methods trained with bias labels, ◇ for methods without."""
    if method not in METHODS:
        return None
    needs = METHODS.entry(method).meta.get("needs_bias_labels")
    return None if needs is None else BIAS_MARKERS[bool(needs)]


def dataset_spec(dataset: str) -> Any | None:
    """The registered dataset's spec, or None while the dataset is not registered."""
    if dataset not in DATASETS:
        return None
    return getattr(DATASETS.get(dataset), "spec", None)


#: A registered dataset's declared kind -> its accuracy table
KIND_TABLES = {"synthetic": "synthetic", "real": "real"}


def table_of(dataset: str) -> str:
    """Which accuracy table a dataset's rows go to: its declared kind
    (``register_dataset(..., kind="synthetic")``: Table 1, an unbiased test set;
    ``kind="real"``: Table 2, a bias-conflicting test set); the paper's datasets by name while
    not registered; "other" for a dataset that declares no kind."""
    if dataset in DATASETS:
        kind = DATASETS.entry(dataset).meta.get("kind")
        if kind is not None:
            if kind not in KIND_TABLES:
                raise ConfigError(
                    f"dataset {dataset!r} declares kind={kind!r}",
                    hint=f"kind is one of {', '.join(KIND_TABLES)} (or left out: 'other' table)",
                )
            return KIND_TABLES[kind]
    if dataset in SYNTHETIC:
        return "synthetic"
    if dataset in REAL:
        return "real"
    return "other"
