"""The captions of the accuracy and class-wise tables: what a cell is and how to read it."""

from __future__ import annotations

from debias_bench.reporting.layout import dataset_name, kind_of_test_set, method_name
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.ranks import RankTest
from debias_bench.reporting.significance import PAIRED, WELCH
from debias_bench.reporting.stats import STATISTIC, TieTests
from debias_bench.reporting.terms import TermsDifference, terms_caption


def ratio_label(ratio: float) -> str:
    return f"{ratio:.1f}"


def note_on_test_sets(datasets: list[str], split: str) -> str:
    """Which test sets are unbiased and which hold bias-conflicting samples only."""
    if split != "test":
        return ""
    official = [dataset_name(d) for d in datasets if kind_of_test_set(d) == "official"]
    others = [d for d in datasets if kind_of_test_set(d) != "official"]
    conflicting = [dataset_name(d) for d in others if kind_of_test_set(d) == "conflicting"]
    text = ""
    if others and not conflicting:
        text = " The test sets are unbiased (balanced over biases)."
    elif conflicting:
        text = f" The test sets of {', '.join(conflicting)} hold bias-conflicting samples only."
    if official:  # Waterbirds, CelebA: the release's own split, neither of the two
        text += f" {', '.join(official)}: the official test split, as released."
    return text


def caption(
    what: str,
    protocol: str,
    preset: str,
    opts: ReportOptions,
    max_n: int,
    paper: PaperNumbers | None = None,
    paper_table: str = "",
    ties: TieTests | None = None,
    ranks: RankTest | None = None,
    terms: list[TermsDifference] | None = None,
) -> str:
    """``what`` the cells are, then the protocol, statistic, marks, the tests behind the ties
    and the ranks (``--interval``), the paper's rows, and the columns trained on other terms
    (:mod:`debias_bench.reporting.terms`)."""
    parts = [
        f"{what} Protocol `{protocol}`, preset `{preset}`, model selection `{opts.selection}`.",
        f"Cells: {STATISTIC}; n = {max_n} seed{'' if max_n == 1 else 's'} unless a cell shows "
        "its own n.",
    ]
    if opts.interval is not None:
        parts.append(f"In square brackets: {opts.interval.describe()}.")
    parts.append("Best per row in bold." if ties is None else significance_text(ties))
    if opts.ours:
        parts.append(
            f"In brackets: {method_name(opts.ours)}'s gain (+) or loss (-) against the best "
            "other method, from the printed means."
        )
    parts.append("(*) and (◇): methods trained with and without bias labels.")
    parts.append(
        "Empty cells say why: not run, running, unfinished, stale (trained by other code of "
        "its method or dataset: rerun the same `bench run` to retrain it), failed, skipped by "
        "the method, or "
        "not recorded (finished runs without this selection or metric, e.g. no in-distribution "
        "validation split: each result.json says why) (runs not in the table are listed below "
        "it)."
    )
    if ranks is not None:
        parts.append(ranks.describe(method_name))
    if paper is not None:
        parts.append(
            f"Rows `paper`: {paper.short_source()}, {paper_table} ({paper.statistic}; produced "
            f"with the `{paper.protocol}` code paths; bold and brackets as in the paper, among "
            "all its methods); rows `diff`: ours - paper, † where "
            "|diff| exceeds the combined std sqrt(std_ours² + std_paper²) "
            "(std_ours = 0 for a single seed)."
        )
    if terms:
        parts.append(terms_caption(terms))
    return " ".join(parts)


def significance_text(ties: TieTests) -> str:
    """How the bold and ≈ marks were decided: the tests, how many of each, the correction."""
    return (
        f"Best per row (highest printed mean) in bold; ≈: not distinguishable from it at "
        f"α = {ties.alpha:g}: a two-sided {PAIRED}-test on the seeds both ran "
        f"({ties.paired} comparison{'' if ties.paired == 1 else 's'}; runs of one seed share "
        f"the data build and the batch order, drawn from (seed, epoch)), a {WELCH}-test where "
        f"the seeds or the data build differ ({ties.welch}), Holm-corrected over the table's "
        f"{ties.total} comparison{'' if ties.total == 1 else 's'}; a cell with a single seed "
        "(or beside a best with one) cannot be tested and is marked ≈ too."
    )
