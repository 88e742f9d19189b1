"""Columns trained on other terms than the rest of their table (``debias_bench.config.terms``):
their header carries a mark (:data:`~debias_bench.reporting.model.TERMS_MARK`) and the caption
names each difference, in every format, so that a plugin fed other inputs than the baselines (or
a column run off its recipe) is never compared with them silently."""

from __future__ import annotations

import pandas as pd

from debias_bench.config.terms import TermsDifference, differences
from debias_bench.reporting.layout import dataset_name, method_name
from debias_bench.reporting.model import TERMS_MARK, Column


def terms_differences(block: pd.DataFrame, protocol: str) -> list[TermsDifference]:
    """The (dataset, column) pairs of a table's runs whose terms differ from the reference
    column's on the same dataset (runs that recorded no readable config are left out)."""
    known = block[block["terms"].map(lambda t: isinstance(t, dict))]
    terms = {
        (str(dataset), str(method)): group["terms"].tolist()
        for (dataset, method), group in known.groupby(["dataset", "method"], sort=True)
    }
    return differences(terms, protocol)


def marked_columns(columns: list[Column], found: list[TermsDifference]) -> list[Column]:
    """``columns`` with the terms of those that differ (the header's mark)."""
    by_method: dict[str, list[str]] = {}
    for diff in found:
        by_method.setdefault(diff.method, []).append(f"{dataset_name(diff.dataset)}: {diff.terms}")
    return [
        Column(c.key, c.label, c.marker, "; ".join(by_method[c.key])) if c.key in by_method else c
        for c in columns
    ]


def terms_caption(found: list[TermsDifference]) -> str:
    """The caption's sentence naming every difference ("" when the columns share their
    terms)."""
    if not found:
        return ""
    each = "; ".join(
        f"{method_name(d.method)} on {dataset_name(d.dataset)}: {d.terms} "
        f"({method_name(d.reference)}: {d.reference_terms})"
        for d in found
    )
    return (
        f"{TERMS_MARK}: trained on other terms than the rest of the table (input scaling, "
        f"sampling, values off the recipe; docs/protocols.md), so not a like-for-like "
        f"comparison: {each}."
    )
