"""Issue 53: the published Waterbirds and CelebA numbers (results/reference/
subpop_waterbirds_celeba.yaml) and the ``subpop`` table's ``--compare-paper`` rows, which compare
the worst-group accuracy the accuracy tables cannot show."""

from __future__ import annotations

import pytest
from test_report import write_run

from debias_bench.registry import DATASETS, METHODS
from debias_bench.reporting import ReportOptions, build_tables, load_paper, load_records, render
from debias_bench.runs.store import RunStore

REFERENCE = "subpop_waterbirds_celeba"


def test_the_published_cells_as_read():
    """Each cell as its notes say it was read; Waterbirds' published average (the adjusted one)
    never under ``accuracy``; keys are registered methods at the ratio each dataset runs at."""
    paper = load_paper(REFERENCE)
    assert paper.accuracy == {
        ("celeba", 44.9, "vanilla"): (94.9, None),  # Sagawa et al. Table 3
        ("celeba", 44.9, "groupdro"): (92.9, None),
        ("celeba", 44.9, "jtt"): (88.0, None),  # JTT Table 1
    }
    assert paper.worst_group == {
        ("waterbirds", 5.0, "vanilla"): (63.7, None),  # Sagawa et al. Table 3
        ("waterbirds", 5.0, "groupdro"): (91.4, None),
        ("waterbirds", 5.0, "jtt"): (86.7, None),  # JTT Table 1
        ("waterbirds", 5.0, "lc"): (90.5, None),  # LC Table 2
        ("celeba", 44.9, "vanilla"): (47.8, None),
        ("celeba", 44.9, "groupdro"): (88.9, None),
        ("celeba", 44.9, "lc"): (88.1, None),
    }
    assert paper.adjusted_average == {
        ("waterbirds", 5.0, "vanilla"): (97.0, None),
        ("waterbirds", 5.0, "groupdro"): (93.5, None),
    }
    for cells in paper.cells().values():
        for dataset, ratio, method in cells:
            assert method in METHODS.names() and method in paper.sources
            assert DATASETS.get(dataset).spec.ratios == (ratio,)
    assert "Sagawa et al." in paper.short_source() and "Logit Correction" in paper.short_source()


def test_combined_with_the_default_reference():
    """``A+B`` adds B's worst-group cells too; a method with cells in both (Vanilla) names both
    papers, one only in B keeps B's source, and A's own cells are unchanged."""
    default = load_paper()
    both = load_paper(f"etf_debias_cvpr2024+{REFERENCE}")
    assert {k: v for k, v in both.accuracy.items() if k in default.accuracy} == default.accuracy
    assert both.worst_group[("waterbirds", 5.0, "groupdro")] == (91.4, None)
    assert both.accuracy[("celeba", 44.9, "vanilla")] == (94.9, None)
    assert both.sources["groupdro"].startswith("Sagawa et al.")
    assert both.sources["vanilla"] == (
        f"{default.source.split(' (')[0]} and Sagawa et al., Distributionally Robust Neural "
        "Networks for Group Shifts, ICLR 2020"
    )


def test_subpop_compares_average_and_worst_group_with_the_paper(tmp_path):
    """Under each row the reference has a number for: its row and ours - paper; Waterbirds'
    average stays empty (the published one is the adjusted average), so does a method the
    reference lacks (no rows at all)."""
    root = tmp_path / "runs"
    for seed, acc in enumerate([90.0, 92.0]):  # worst group: acc - 30 (write_run)
        write_run(root, "groupdro", "waterbirds", 5.0, seed, acc, worst_group=(1, 0))
        write_run(root, "groupdro", "celeba", 44.9, seed, acc, worst_group=(1, 1))
    write_run(root, "lff", "celeba", 44.9, 0, 80.0, worst_group=(1, 1))
    records = load_records(RunStore(root))
    (plain,) = build_tables(records, "subpop", ReportOptions())
    (table,) = build_tables(records, "subpop", ReportOptions(), load_paper(REFERENCE))
    assert [r.kind for r in plain.rows] == ["ours"] * 3
    assert table.row_headers == (*plain.row_headers, "source")
    assert {r.labels[3] for r in table.rows} == {"ours", "paper", "diff"}  # its own column
    rows = {(r.labels[0], r.kind): r for r in table.rows if r.kind != "ours"}
    kinds = [(r.kind, r.labels[2]) for r in table.rows]
    assert sorted(k for k, _ in kinds) == ["diff", "diff", "ours", "ours", "ours", "paper", "paper"]
    for at, (kind, _) in enumerate(kinds):  # each paper row right under ours, then its diff
        if kind == "paper":
            assert kinds[at - 1] == ("ours", "GroupDRO*") and kinds[at + 1][0] == "diff"
    wb_paper, wb_diff = rows[("waterbirds", "paper")], rows[("waterbirds", "diff")]
    assert wb_paper.cells["worst_group_accuracy"].mean == 91.4
    assert not wb_paper.cells["accuracy"].has_value  # the adjusted average is not ours
    assert wb_diff.cells["worst_group_accuracy"].mean == pytest.approx(61.0 - 91.4)  # 60, 62
    assert not wb_diff.cells["aligned_accuracy"].has_value
    celeba_paper, celeba_diff = rows[("celeba", "paper")], rows[("celeba", "diff")]
    assert celeba_paper.cells["accuracy"].mean == 92.9
    assert celeba_diff.cells["accuracy"].mean == pytest.approx(91.0 - 92.9)
    assert celeba_diff.cells["worst_group_accuracy"].flag  # |61 - 88.9| > ours' std
    assert "Rows `paper`: " in table.caption and "adjusted one" in table.caption
    assert "91.40" in render([table], "markdown")
