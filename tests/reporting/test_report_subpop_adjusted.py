"""Issue 53: the ``subpop`` table's adjusted average (Waterbirds' published "average": the test
groups' accuracies weighted by the training groups' sizes), computed from the group accuracies
a run records and the weights the dataset's family declares, compared with the reference's
``adjusted_average`` cells by ``--compare-paper``; datasets without one show none."""

from __future__ import annotations

from typing import Any

import pytest
from support.planted import finish, plant

from debias_bench.reporting import ReportOptions, build_tables, load_paper, load_records, render
from debias_bench.reporting.model import Table
from debias_bench.runs.store import RunStore

REFERENCE = "subpop_waterbirds_celeba"
#: the release's training groups, (landbird, waterbird) x (land, water): Sagawa et al.
#: Appendix C.1, typed here apart from the code's copy
TRAIN = {(0, 0): 3498, (0, 1): 184, (1, 0): 56, (1, 1): 1057}
#: the test split's groups (balanced backgrounds), which weight our plain average
TEST = [[2255, 2255], [642, 642]]
#: test group accuracies of two seeds of a Waterbirds run
SEEDS = [[[99.0, 80.0], [70.0, 95.0]], [[97.0, 76.0], [60.0, 93.0]]]


def by_hand(groups: list[list[float]]) -> float:
    """The adjusted average of one run, written out."""
    weighted = sum(n * groups[c][b] for (c, b), n in TRAIN.items())
    return weighted / (3498 + 184 + 56 + 1057)


def split_metrics(groups: list[list[float]], counts: list[list[int]]) -> dict[str, Any]:
    """A split as the engine records it: its accuracy the count-weighted mean of its groups
    (a result that contradicts itself is read as corrupt)."""
    pairs = [(groups[c][b], counts[c][b]) for c in range(2) for b in range(2)]
    accuracy = sum(a * n for a, n in pairs) / sum(n for _, n in pairs)
    return {
        "accuracy": accuracy,
        "aligned_accuracy": (groups[0][0] * counts[0][0] + groups[1][1] * counts[1][1])
        / (counts[0][0] + counts[1][1]),
        "conflicting_accuracy": (groups[0][1] * counts[0][1] + groups[1][0] * counts[1][0])
        / (counts[0][1] + counts[1][0]),
        "group_accuracy": groups,
        "group_counts": counts,
    }


def plant_run(
    store: RunStore, method: str, dataset: str, ratio: float, seed: int, groups: Any
) -> None:
    """A done run whose every selection has ``groups`` as its test (and validation) group
    accuracies; ``groups`` None: a result recorded before group accuracies were."""
    if groups is None:
        split = {"accuracy": 90.0, "aligned_accuracy": 95.0, "conflicting_accuracy": 80.0}
    else:
        split = split_metrics(groups, TEST)
    chosen = {"step": 10, "epoch": 1.0, "valid": dict(split), "test": dict(split)}
    selections = {name: dict(chosen) for name in ("last", "best_valid", "best_test")}
    finish(plant(store, method, dataset, ratio, seed), selections=selections)


@pytest.fixture
def store(tmp_path):
    store = RunStore(tmp_path / "runs")
    for seed, groups in enumerate(SEEDS):
        plant_run(store, "groupdro", "waterbirds", 5.0, seed, groups)
        plant_run(store, "groupdro", "celeba", 44.9, seed, groups)
    return store


def rows_of(table: Table) -> dict[tuple[str, str], Any]:
    """(dataset, source) -> row (source ``ours`` in a table without the paper)."""
    return {(r.labels[0], r.kind): r for r in table.rows}


def test_the_adjusted_average_is_the_training_weighted_mean_of_the_test_groups(store):
    (table,) = build_tables(load_records(store), "subpop", ReportOptions())
    assert [c.key for c in table.columns][-1] == "adjusted_average"
    assert [c.label for c in table.columns][-1] == "adjusted avg."
    cell = rows_of(table)[("waterbirds", "ours")].cells["adjusted_average"]
    first, second = by_hand(SEEDS[0]), by_hand(SEEDS[1])
    assert first == pytest.approx(465357 / 4795)  # 3498*99 + 184*80 + 56*70 + 1057*95
    assert cell.mean == pytest.approx((first + second) / 2)
    assert cell.std == pytest.approx(abs(first - second) / 2**0.5)  # two seeds, ddof=1
    assert cell.n == 2
    # not our plain average, which the balanced test split weights
    plain = rows_of(table)[("waterbirds", "ours")].cells["accuracy"]
    assert plain.mean != pytest.approx(cell.mean, abs=0.5)
    assert "Adjusted avg. (adjusted average): the test accuracy of each" in table.caption
    assert "training split" in table.caption
    text = render([table], "markdown")
    assert "| adjusted avg. " in text and f"{cell.mean:.2f} ± {cell.std:.2f}" in text


def test_a_dataset_without_an_adjusted_average_shows_a_dash(store, tmp_path):
    """CelebA beside Waterbirds: its cell empty with no reason (a dash), though its runs
    record group accuracies; a table of CelebA alone has no such column nor caption line."""
    records = load_records(store)
    (table,) = build_tables(records, "subpop", ReportOptions())
    celeba = rows_of(table)[("celeba", "ours")]
    assert not celeba.cells["adjusted_average"].has_value
    assert celeba.cells["adjusted_average"].missing is None
    assert celeba.cells["worst_group_accuracy"].has_value
    (line,) = [r for r in render([table], "markdown").splitlines() if r.startswith("| celeba")]
    assert line.rstrip(" |").endswith("–")
    (alone,) = build_tables(records[records["dataset"] == "celeba"], "subpop", ReportOptions())
    assert "adjusted_average" not in [c.key for c in alone.columns]
    assert "adjusted avg." not in render([alone], "markdown")
    assert "Adjusted avg." not in alone.caption
    assert records.loc[records["dataset"] == "celeba", "adjusted_average"].isna().all()


def test_a_result_without_group_accuracies_is_not_recorded(tmp_path):
    store = RunStore(tmp_path / "runs")
    plant_run(store, "vanilla", "waterbirds", 5.0, 0, None)
    (table,) = build_tables(load_records(store), "subpop", ReportOptions())
    cell = rows_of(table)[("waterbirds", "ours")].cells["adjusted_average"]
    assert not cell.has_value and cell.missing == "not recorded"


def test_compare_paper_sets_waterbirds_published_average_against_the_adjusted_one(store):
    """The reference's ``adjusted_average`` cell (Sagawa et al. Table 3, group DRO: 93.5) in
    the adjusted-average column of Waterbirds' paper row, ours - paper under it; the average
    column's paper cell stays empty; CelebA's rows have none."""
    paper = load_paper(REFERENCE)
    (table,) = build_tables(load_records(store), "subpop", ReportOptions(), paper)
    rows = rows_of(table)
    ours = rows[("waterbirds", "ours")].cells["adjusted_average"]
    theirs = rows[("waterbirds", "paper")].cells["adjusted_average"]
    diff = rows[("waterbirds", "diff")].cells["adjusted_average"]
    assert theirs.mean == 93.5 and theirs.std is None
    expected = (by_hand(SEEDS[0]) + by_hand(SEEDS[1])) / 2
    assert diff.mean == pytest.approx(expected - 93.5)
    assert diff.flag == (abs(expected - 93.5) > ours.std)  # the combined std: ours alone
    assert not rows[("waterbirds", "paper")].cells["accuracy"].has_value
    assert not rows[("waterbirds", "diff")].cells["accuracy"].has_value
    assert not rows[("celeba", "paper")].cells["adjusted_average"].has_value
    assert not rows[("celeba", "diff")].cells["adjusted_average"].has_value
    assert rows[("celeba", "paper")].cells["accuracy"].mean == 92.9
    assert "compared in the adjusted avg. column, never in the average" in table.caption
    (line,) = [
        r
        for r in render([table], "markdown").splitlines()
        if r.startswith("| waterbirds") and "| diff " in r
    ]
    assert line.rstrip(" |").split("|")[-1].strip().startswith(f"{expected - 93.5:+.2f}")
