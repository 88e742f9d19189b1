"""The reporter: table models from run records, their numbers, marks and renderings.

A fixed set of run directories (written with the real run store) covers every mark the tables
print: bold, the bracketed gain and loss, a cell with fewer seeds (n), failed, skipped, running
and never-run cells. Golden files pin the Markdown and LaTeX; regenerate them after a
deliberate change with ``BENCH_UPDATE_GOLDEN=1 pytest tests/reporting/test_report.py``.
"""

from __future__ import annotations

import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pandas as pd
import pytest
from support.planted import plant

from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError, UnknownNameError
from debias_bench.reporting import (
    ReportOptions,
    build_tables,
    classwise,
    load_paper,
    load_records,
    render,
)
from debias_bench.reporting.catalog import TABLES, table_names
from debias_bench.reporting.layout import dataset_spec, parse_layout, reference_layout
from debias_bench.reporting.records import COLUMNS
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

GOLDEN = Path(__file__).parents[1] / "golden"
#: BAR's actions in the column order of the paper's Tables D.1 and D.2
BAR_PAPER_CLASSES = ("climbing", "diving", "fishing", "vaulting", "racing", "throwing")
SELECTIONS = ("last", "best_valid", "best_test")


# ----------------------------------------------------------------------------- fixtures
def metrics(acc: float, per_class: list[float] | None = None) -> dict[str, Any]:
    return {
        "accuracy": acc,
        "aligned_accuracy": min(acc + 10.0, 100.0),
        "conflicting_accuracy": acc - 5.0,
        "group_mean_accuracy": acc - 1.0,
        "per_class_accuracy": per_class if per_class is not None else [acc, acc],
    }


def write_run(
    root: Path,
    method: str,
    dataset: str,
    ratio: float,
    seed: int,
    acc: float | None = None,
    state: str = "done",
    note: str | None = None,
    per_class: list[float] | None = None,
    time_s: float = 10.0,
    memory_mb: float = 100.0,
    protocol: str = "official",
    worst_group: tuple[int, int] | None = None,
) -> RunDir:
    """A run directory as the engine leaves it; ``acc`` is the test accuracy of ``last``
    (``worst_group``: its (class, bias) group of lowest test accuracy)."""
    run = plant(RunStore(root), method, dataset, ratio, seed, protocol=protocol)
    if state != "done":
        fields = {"error": note} if state == "failed" else {"reason": note} if note else {}
        if state != "pending":
            run.transition(RunState(state), **fields)
        return run
    assert acc is not None
    selections = {
        sel: {
            "step": 100,
            "epoch": 1.0,
            "valid": metrics(acc + 1.0 + k),
            "test": metrics(acc + k, [p + k for p in per_class] if per_class else None),
        }
        for k, sel in enumerate(SELECTIONS)  # best_* differ from last by +1, +2
    }
    if worst_group is not None:
        for chosen in selections.values():
            chosen["test"].update(worst_group=list(worst_group), worst_group_accuracy=acc - 30)
    run.transition(RunState.RUNNING)
    run.write_result(
        {
            "method": method,
            "dataset": dataset,
            "ratio": ratio,
            "seed": seed,
            "protocol": protocol,
            "preset": "paper",
            "selections": selections,
            "train_time_s": time_s,
            "prepare_time_s": 0.0,
            "peak_memory_mb": memory_mb,
            "device": "cuda:0",
        }
    )
    run.transition(RunState.DONE, exit_code=0)
    return run


def rid(method: str, dataset: str, ratio: float, seed: int) -> str:
    """The run id ``write_run`` gives that run (official protocol, paper preset)."""
    return make_config(method, dataset, ratio, seed).run_id


def fixed_store(root: Path) -> Path:
    """The golden records: Colored MNIST (Table 1), the toy dataset ('other') and BAR."""
    for seed, (van, etf) in enumerate([(40.0, 80.0), (42.0, 82.5), (44.0, 84.0)]):
        write_run(root, "vanilla", "cmnist", 1.0, seed, van, time_s=10.0 + seed)
        write_run(root, "etf_debias", "cmnist", 1.0, seed, etf, time_s=10.5 + seed)
    for seed, acc in enumerate([70.0, 71.25]):  # lff: two seeds finished, the third failed
        write_run(root, "lff", "cmnist", 1.0, seed, acc, time_s=20.0, memory_mb=210.0)
    write_run(root, "lff", "cmnist", 1.0, 2, state="failed", note="RuntimeError: out of memory")
    for seed, acc in enumerate([30.0, 31.0, 32.5]):
        write_run(root, "vanilla", "cmnist", 0.5, seed, acc)
    write_run(root, "etf_debias", "cmnist", 0.5, 0, 61.0)  # n=1: no std
    write_run(root, "etf_debias", "cmnist", 0.5, 1, state="running")
    write_run(root, "etf_debias", "cmnist", 0.5, 2, state="pending")
    write_run(root, "lff", "cmnist", 0.5, 0, state="skipped", note="needs a GPU")
    # toy ('other' table): the baseline beats ours -> a loss in brackets; a tie for bold
    for seed, (van, lff, etf) in enumerate([(50.0, 66.0, 60.0), (52.0, 64.0, 62.0)]):
        write_run(root, "vanilla", "toy", 5.0, seed, van)
        write_run(root, "lff", "toy", 5.0, seed, lff)
        write_run(root, "etf_debias", "toy", 5.0, seed, etf)
    for seed, (a, b) in enumerate([(55.0, 55.0), (57.0, 57.0)]):
        write_run(root, "vanilla", "toy", 20.0, seed, a)
        write_run(root, "etf_debias", "toy", 20.0, seed, b)
    # BAR 1%: per-class accuracies in the dataset's class order
    for seed in range(2):
        vanilla = [70.0, 50.0, 75.0, 71.0, 85.0, 48.0 + 2 * seed]
        ours = [83.0, 63.0 + seed, 76.0, 74.0, 87.0 - seed, 50.0]
        write_run(root, "vanilla", "bar", 1.0, seed, 68.0 + seed, per_class=vanilla)
        write_run(root, "etf_debias", "bar", 1.0, seed, 72.0 + seed, per_class=ours)
    return root


@pytest.fixture
def store(tmp_path: Path) -> Path:
    return fixed_store(tmp_path / "runs")


@pytest.fixture
def records(store: Path) -> pd.DataFrame:
    return load_records(RunStore(store))


def check_golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("BENCH_UPDATE_GOLDEN"):
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    assert path.is_file(), f"{path} missing: run with BENCH_UPDATE_GOLDEN=1 once"
    assert text == path.read_text(), f"{name} differs from the golden file"


def cells_of(table, kind: str = "ours") -> dict[tuple, Any]:
    return {
        (*row.labels, key): cell
        for row in table.rows
        if row.kind == kind
        for key, cell in row.cells.items()
    }


# ----------------------------------------------------------------------------- golden
@pytest.mark.parametrize("fmt,suffix", [("markdown", "md"), ("latex", "tex")])
def test_golden_rendering(records, fmt, suffix):
    out = build_tables(records, "all", ReportOptions())
    check_golden(f"report_all.{suffix}", render(out, fmt))


def test_golden_compare_paper(records):
    out = build_tables(records, "synthetic", ReportOptions(), load_paper())
    check_golden("report_compare.md", render(out, "markdown"))


# ----------------------------------------------------------------------------- marks
def test_marks_bold_brackets_n_and_missing_reasons(records):
    (synthetic,) = build_tables(records, "synthetic", ReportOptions())
    c = cells_of(synthetic)
    # cmnist 1%: ETF-Debias best (bold), gain over the best other from the printed means
    # (82.1667 -> 82.17, LfF's 70.625 -> 70.62 as Python's float rounding prints it)
    etf = c[("cmnist", "1.0", "etf_debias")]
    assert etf.bold and etf.delta == pytest.approx(11.55)
    assert not c[("cmnist", "1.0", "vanilla")].bold
    lff = c[("cmnist", "1.0", "lff")]
    assert (lff.n, lff.expected_n, lff.show_n) == (2, 3, True)
    # cmnist 0.5%: one seed finished (no std, n shown), lff skipped
    etf05 = c[("cmnist", "0.5", "etf_debias")]
    assert etf05.n == 1 and etf05.std is None and etf05.show_n
    assert c[("cmnist", "0.5", "lff")].missing == "skipped"
    (other,) = build_tables(records, "other", ReportOptions())
    c = cells_of(other)
    assert c[("toy", "5.0", "lff")].bold
    assert c[("toy", "5.0", "etf_debias")].delta == pytest.approx(61.0 - 65.0)
    assert c[("toy", "20.0", "lff")].missing == "not run"
    tie = [c[("toy", "20.0", m)] for m in ("vanilla", "etf_debias")]
    assert all(t.bold for t in tie) and tie[1].delta == 0.0
    notes = "\n".join(synthetic.notes)
    assert f"{rid('lff', 'cmnist', 1, 2)}: failed (crashed: RuntimeError: out of memory)" in notes
    assert f"{rid('lff', 'cmnist', 0.5, 0)}: skipped (needs a GPU)" in notes
    assert f"{rid('etf_debias', 'cmnist', 0.5, 1)}: running" in notes
    assert f"{rid('etf_debias', 'cmnist', 0.5, 2)}: pending" in notes


def test_missing_reasons_running_and_failed(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 2.0, 0, 50.0)
    running = write_run(root, "etf_debias", "cmnist", 2.0, 0, state="running")
    failed = write_run(root, "lff", "cmnist", 2.0, 0, state="failed", note="boom\n  hint: more")
    (table,) = build_tables(load_records(RunStore(root)), "synthetic", ReportOptions())
    c = cells_of(table)
    assert c[("cmnist", "2.0", "etf_debias")].missing == "running"
    assert c[("cmnist", "2.0", "lff")].missing == "failed"
    assert "– (failed)" in render([table], "markdown")
    assert table.notes == [
        f"{running.run_id}: running",
        f"{failed.run_id}: failed (crashed: boom)",
    ]
    assert r"-- \dbmiss{(running)}" in render([table], "latex")


def test_a_stale_run_reads_stale_and_says_how_to_refresh_it(tmp_path, monkeypatch):
    """Issue 39.13: the cell of a run trained by older code read "unfinished"."""
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 2.0, 0, 50.0)
    old = write_run(root, "lff", "cmnist", 2.0, 0, 60.0)
    why = "code changed since its result was written (code aaaa -> bbbb)"
    real = RunDir.staleness
    monkeypatch.setattr(RunDir, "staleness", lambda r: why if r.path == old.path else real(r))
    (table,) = build_tables(load_records(RunStore(root)), "synthetic", ReportOptions())
    assert cells_of(table)[("cmnist", "2.0", "lff")].missing == "stale"
    assert "– (stale)" in render([table], "markdown")
    assert table.notes == [f"{old.run_id}: stale ({why}): rerun the same `bench run` to retrain it"]
    assert "stale (trained by other code of its method or dataset: rerun" in table.caption


def test_subpop_names_each_rows_worst_group_by_its_class_and_bias_names(tmp_path):
    """Issue 39.13: the worst group read ``class 3, bias 7`` under "Not in the table"."""
    root = tmp_path / "runs"
    for seed, group in enumerate([(3, 7), (3, 7), (1, 2)]):
        write_run(root, "vanilla", "cmnist", 1.0, seed, 50.0, worst_group=group)
    write_run(root, "vanilla", "toy", 5.0, 0, 50.0, worst_group=(1, 0))
    write_run(root, "vanilla", "cmnist", 1.0, 3, state="failed", note="boom")
    (table,) = build_tables(load_records(RunStore(root)), "subpop", ReportOptions())
    toy = dataset_spec("toy")
    toy_group = f"class {(toy.class_names or '01')[1]}, bias {(toy.bias_names or '0')[0]}"
    assert table.remarks == [
        "cmnist 1 % Vanilla: class 3, bias colour7 (2 of 3 seeds)",  # cmnist's declared names
        f"toy 5 % Vanilla: {toy_group} (1 of 1 seeds)",
    ]
    assert table.notes == [f"{rid('vanilla', 'cmnist', 1.0, 3)}: failed (crashed: boom)"]
    text = render([table], "markdown")
    assert "Worst group of each row (the one most often worst over its seeds):\n- cmnist" in text
    assert text.index("Worst group of each row") < text.index("Not in the table:")
    latex = render([table], "latex")
    assert "Worst group of each row" in latex and "Not in the table" in latex


def test_a_done_run_without_the_selection_is_not_recorded_not_unfinished(tmp_path):
    """A finished run with no in-distribution validation split has no best_valid_iid: its
    cell says so instead of calling the run unfinished."""
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 2.0, 0, 50.0)
    (table,) = build_tables(
        load_records(RunStore(root)), "synthetic", ReportOptions(selection="best_valid_iid")
    )
    cell = cells_of(table)[("cmnist", "2.0", "vanilla")]
    assert not cell.has_value and cell.missing == "not recorded"
    assert "– (not recorded)" in render([table], "markdown")


@pytest.mark.parametrize("selection", SELECTIONS)
@pytest.mark.parametrize("metric", ["accuracy", "conflicting_accuracy"])
def test_numbers_match_a_direct_pandas_computation(records, selection, metric):
    opts = ReportOptions(selection=selection, metric=metric)
    got = {}
    for table in build_tables(records, "all", opts):
        if table.name in ("synthetic", "other"):
            got.update(cells_of(table))
    done = records[
        (records.state == "done") & (records.selection == selection) & (records.split == "test")
    ]
    expected = done.groupby(["dataset", "ratio", "method"])[metric].agg(
        mean="mean", std=lambda s: s.std(ddof=1), n="count"
    )
    done_bar = expected.index.get_level_values("dataset") != "bar"
    assert len(expected[done_bar]) == sum(c.has_value for c in got.values())
    for (dataset, ratio, method), row in expected[done_bar].iterrows():
        cell = got[(dataset, f"{ratio:.1f}", method)]
        assert cell.mean == pytest.approx(row["mean"], abs=1e-12)
        assert cell.n == row["n"]
        if row["n"] > 1:
            assert cell.std == pytest.approx(row["std"], abs=1e-12)
        else:
            assert cell.std is None
        # bold: the best printed mean of the row
        row_means = expected.loc[(dataset, ratio)]["mean"].round(2)
        assert cell.bold == (round(row["mean"], 2) == row_means.max())
        if method == "etf_debias" and len(row_means) > 1:
            assert cell.delta == pytest.approx(
                row_means["etf_debias"] - row_means.drop("etf_debias").max()
            )


def test_classwise_columns_follow_the_paper_and_average_is_the_accuracy(records):
    (bar,) = build_tables(records, "bar-classwise", ReportOptions())
    assert [c.key for c in bar.columns] == [*BAR_PAPER_CLASSES, "average"]
    c = cells_of(bar)
    etf = next(r for r in bar.rows if r.group == "etf_debias")
    assert c[(etf.labels[0], "diving")].mean == pytest.approx(63.0 + 0.5)
    assert c[(etf.labels[0], "average")].mean == pytest.approx(72.5)
    assert c[(etf.labels[0], "average")].delta == pytest.approx(72.5 - 68.5)
    assert c[(etf.labels[0], "climbing")].bold and c[(etf.labels[0], "climbing")].delta is None


def test_the_paper_reference_declares_its_tables_and_order():
    layout = reference_layout()
    assert layout.ours == "etf_debias" and layout.baseline == "vanilla"
    assert list(layout.methods) == [
        "vanilla", "lff", "lff_be", "end", "sd", "disent", "selecmix", "etf_debias",
    ]  # fmt: skip
    assert list(layout.datasets) == ["cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar"]
    tables = {t.id: (t.label, t.layout, t.kind, t.datasets) for t in layout.tables}
    assert tables == {
        "synthetic": ("Table 1", "accuracy", "synthetic", ("cmnist", "cifar10c")),
        "real": ("Table 2", "accuracy", "real", ("bffhq", "dogs_and_cats", "bar")),
        "bar-classwise": ("Tables D.1/D.2", "per_class", None, ("bar",)),
    }
    assert layout.table("bar-classwise").classes == BAR_PAPER_CLASSES


def test_a_malformed_reference_layout_is_a_clear_error():
    data = {"baseline": "vanilla", "datasets": {"a": "A"}}
    bad_tables = [
        {"t": {"title": "T", "layout": "grid"}},
        {"t": {"title": "T", "kind": "medical"}},
        {"t": {"title": "T", "layout": "per_class", "datasets": ["a", "a"]}},
        {"t": {"title": "T", "datasets": ["b"]}},
    ]
    for tables_ in bad_tables:
        with pytest.raises(ConfigError, match="reference table 't'"):
            parse_layout({**data, "tables": tables_})


def test_registered_tables_and_all():
    assert TABLES.names() == ["synthetic", "real", "other", "bar-classwise", "cost", "subpop"]
    assert table_names("all") == ["synthetic", "real", "other", "bar-classwise", "cost"]
    with pytest.raises(UnknownNameError, match="valid names: synthetic, real"):
        table_names("classwise")


def test_class_columns_map_names_in_any_order(monkeypatch):
    shuffled = ("Racing", "climbing", "Pole_Vaulting", "throwing", "diving", "fishing")
    spec = SimpleNamespace(class_names=shuffled, num_classes=6)
    monkeypatch.setattr(classwise, "dataset_spec", lambda d: spec)
    columns = classwise.class_columns("bar", 6, BAR_PAPER_CLASSES)
    assert [key for _, key, _ in columns] == list(BAR_PAPER_CLASSES)
    assert [k for k, _, _ in columns] == [1, 4, 5, 2, 0, 3]
    monkeypatch.setattr(classwise, "dataset_spec", lambda d: None)
    assert [key for _, key, _ in classwise.class_columns("bar", 3, BAR_PAPER_CLASSES)] == [
        "class 0",
        "class 1",
        "class 2",
    ]


def test_protocols_are_never_averaged_together(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 1.0, 0, 30.0, protocol="official")
    write_run(root, "vanilla", "cmnist", 1.0, 0, 70.0, protocol="clean")
    out = build_tables(load_records(RunStore(root)), "synthetic", ReportOptions())
    assert [t.meta["protocol"] for t in out] == ["clean", "official"]
    assert [cells_of(t)[("cmnist", "1.0", "vanilla")].mean for t in out] == [70.0, 30.0]
    assert all(f"Protocol `{t.meta['protocol']}`" in t.caption for t in out)


def test_cost_relative_to_vanilla(records):
    (cost,) = build_tables(records, "all", ReportOptions())[-1:]
    assert cost.name == "cost"
    c = cells_of(cost, "cost")
    time = c[("cmnist", "cuda", "time / run (s)", "lff")]
    vanilla_mean = np.mean([10, 11, 12, 10, 10, 10])  # cmnist vanilla: 1% and 0.5% runs
    assert time.mean == pytest.approx(20.0)
    assert time.ratio == pytest.approx(20.0 / vanilla_mean)
    memory = c[("cmnist", "cuda", "peak memory (MB)", "lff")]
    assert memory.ratio == pytest.approx(2.1)
    assert c[("cmnist", "cuda", "time / run (s)", "vanilla")].ratio == pytest.approx(1.0)


def test_empty_and_partial_stores(tmp_path):
    empty = load_records(RunStore(tmp_path / "nothing"))
    assert build_tables(empty, "all") == []
    assert "no runs" in render([], "markdown")
    root = tmp_path / "runs"
    write_run(root, "etf_debias", "cmnist", 1.0, 0, state="pending")
    (table,) = build_tables(load_records(RunStore(root)), "synthetic")
    assert cells_of(table)[("cmnist", "1.0", "etf_debias")].missing == "unfinished"


# ----------------------------------------------------------------------------- the paper
def paper_records() -> pd.DataFrame:
    """Three seeds per paper cell, m - s, m, m + s: mean m and sample std s exactly."""
    paper = load_paper()
    classes = dict(enumerate(BAR_PAPER_CLASSES))
    rows = []
    for (dataset, ratio, method), (mean, std) in paper.accuracy.items():
        for seed, k in enumerate((-1, 0, 1)):
            per_class = None
            if dataset == "bar":
                per_class = [
                    paper.per_class[(dataset, ratio, method, classes[c])][0]
                    + k * paper.per_class[(dataset, ratio, method, classes[c])][1]
                    for c in range(6)
                ]
            rows.append(
                {
                    "run_id": f"{dataset}_{method}_{ratio}_{seed}",
                    "method": method,
                    "dataset": dataset,
                    "ratio": ratio,
                    "seed": seed,
                    "protocol": "official",
                    "preset": "paper",
                    "state": "done",
                    "selection": "last",
                    "split": "test",
                    "accuracy": mean + k * std,
                    "per_class_accuracy": per_class,
                    "train_time_s": 1.0,
                    "peak_memory_mb": 1.0,
                    "device": "cuda",
                }
            )
    return pd.DataFrame(rows, columns=COLUMNS)


def test_compare_paper_on_the_papers_own_numbers_gives_zero_differences():
    paper = load_paper()
    out = build_tables(paper_records(), "all", ReportOptions(), paper)
    names = [t.name for t in out]
    assert names == ["synthetic", "real", "bar-classwise", "bar-classwise", "cost"]
    n_diffs, nonzero = 0, {}
    for table in out[:-1]:
        for row in table.rows:
            if row.kind == "diff":
                for key, cell in row.cells.items():
                    assert cell.has_value
                    n_diffs += 1
                    if abs(cell.mean) > 1e-9:
                        nonzero[(table.name, table.title, row.labels[0], key)] = cell.mean
                    else:
                        assert not cell.flag
    # The one exception is the paper's own: SD on BAR 1% is 67.33 in Table 2 (our records) but
    # 67.73 in Table D.1's average column.
    assert list(nonzero) == [
        ("bar-classwise", "Class-wise accuracy on BAR, ratio 1.0% (the paper's Tables D.1/D.2)",
         "SD (*)", "average")
    ]  # fmt: skip
    assert list(nonzero.values()) == pytest.approx([67.33 - 67.73])
    # 8 methods x (8 synthetic + 8 real cells) + 2 BAR tables x 8 methods x 7 columns
    assert n_diffs == 8 * 16 + 2 * 8 * 7
    assert "diff" in render(out[:1], "markdown") and "+0.00" not in render(out[:1], "markdown")


# The brackets printed in the paper (Tables 1 and 2, ETF-Debias against the best baseline).
PAPER_BRACKETS = {
    ("cmnist", "0.5"): 1.10, ("cmnist", "1.0"): -1.37, ("cmnist", "2.0"): 0.10,
    ("cmnist", "5.0"): 0.09, ("cifar10c", "0.5"): 3.40, ("cifar10c", "1.0"): 1.86,
    ("cifar10c", "2.0"): 4.53, ("cifar10c", "5.0"): 2.91, ("bffhq", "0.5"): 6.53,
    ("bffhq", "1.0"): 3.00, ("bffhq", "2.0"): 5.00, ("bffhq", "5.0"): 6.60,
    ("dogs_and_cats", "1.0"): 1.20, ("dogs_and_cats", "5.0"): 3.06,
    ("bar", "1.0"): 1.09, ("bar", "5.0"): 1.66,
}  # fmt: skip


def test_gain_and_bold_reproduce_the_papers_brackets():
    out = build_tables(paper_records(), "synthetic", ReportOptions())
    out += build_tables(paper_records(), "real", ReportOptions())
    got = {}
    for table in out:
        for row in table.rows:
            got[row.labels] = row.cells["etf_debias"].delta
            assert row.cells["etf_debias"].bold == (row.cells["etf_debias"].delta > 0)
    assert got == pytest.approx(PAPER_BRACKETS)


def test_unknown_paper_is_a_clear_error():
    with pytest.raises(ConfigError, match="no reference numbers named 'nope'") as info:
        load_paper("nope")
    assert "etf_debias_cvpr2024" in str(info.value.hint)


def test_compare_paper_only_for_test_accuracy():
    with pytest.raises(ConfigError, match="publishes test accuracy"):
        build_tables(paper_records(), "synthetic", ReportOptions(split="valid"), load_paper())


def test_flag_when_the_difference_exceeds_the_combined_std():
    records = paper_records()
    shift = (records.dataset == "cmnist") & (records.ratio == 5.0) & (records.method == "vanilla")
    records.loc[shift, "accuracy"] += 0.05  # paper std 0.04: |0.05| < sqrt(2) * 0.04 ... no
    paper = load_paper()
    (table, *_) = build_tables(records, "synthetic", ReportOptions(), paper)
    diff = cells_of(table, "diff")[("cmnist", "5.0", "diff", "vanilla")]
    assert diff.mean == pytest.approx(0.05) and not diff.flag  # 0.05 < sqrt(0.04² + 0.04²)
    records.loc[shift, "accuracy"] += 0.01  # 0.06 > 0.0566
    (table, *_) = build_tables(records, "synthetic", ReportOptions(), paper)
    diff = cells_of(table, "diff")[("cmnist", "5.0", "diff", "vanilla")]
    assert diff.mean == pytest.approx(0.06) and diff.flag


def test_shipped_reference_matches_the_source_yaml():
    source = Path(__file__).resolve().parents[3] / "shared" / "reference" / "paper_tables.yaml"
    if not source.is_file():
        pytest.skip(f"{source} not found (the paper's tables as extracted)")
    import yaml

    names = {"Vanilla": "vanilla", "LfF": "lff", "LfF+BE": "lff_be", "EnD": "end", "SD": "sd",
             "DisEnt": "disent", "SelecMix": "selecmix", "ETF-Debias": "etf_debias"}  # fmt: skip
    data = yaml.safe_load(source.read_text())["tables"]
    paper = load_paper()
    expected = {
        (d, float(r), names[m]): (v["mean"], v["std"])
        for group in ("synthetic", "real_world")
        for d, ratios in data[group].items()
        for r, methods in ratios.items()
        for m, v in methods.items()
    }
    assert paper.accuracy == expected
    per_class = {
        ("bar", float(r), names[m]): {c: (v["mean"], v["std"]) for c, v in classes.items()}
        for r, methods in data["bar_classwise"].items()
        for m, classes in methods.items()
    }
    assert len(paper.per_class) == sum(len(v) for v in per_class.values())
    for (d, r, m, c), value in paper.per_class.items():
        assert per_class[(d, r, m)][c] == value


def test_a_torn_result_is_listed_not_fatal(tmp_path):
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 1.0, 0, 40.0)
    torn = write_run(root, "vanilla", "cmnist", 1.0, 1, 42.0)
    torn.result_path.write_text('{"selections": ')
    (table,) = build_tables(load_records(RunStore(root)), "synthetic")
    cell = cells_of(table)[("cmnist", "1.0", "vanilla")]
    assert (cell.mean, cell.n, cell.expected_n) == (40.0, 1, 2)
    (note,) = [n for n in table.notes if n.startswith(f"{torn.run_id}: corrupt")]
    assert "result.json is not valid JSON" in note and "move it aside" in note
