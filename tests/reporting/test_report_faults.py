"""Issue 48's fault matrix, the reporter's cases: the cost table's one configuration per cell,
`bench compare`'s header, hints and warnings, escaped Markdown, `-o` written atomically (and its
errors as one line), what `--plot` wrote and why not the rest, and `--ratios` naming the value
asked for. Each test failed on the code before its fix."""

from __future__ import annotations

import errno
import os
import re
import warnings
from pathlib import Path
from typing import Any

import pytest
from test_report import write_run
from test_report_cli import _foreign_copy
from test_report_grouping import write

from debias_bench.cli import main
from debias_bench.errors import ConfigError
from debias_bench.reporting import build_tables, load_records, render
from debias_bench.reporting.model import Cell, Column, Row, Table
from debias_bench.runs.store import RunStore
from debias_bench.session.compare import CompareRequest, compare_text


def out_err(capsys: pytest.CaptureFixture[str]) -> tuple[str, str]:
    captured = capsys.readouterr()
    return captured.out, captured.err


# ----------------------------------------------------------------------------- cost table
def test_the_cost_table_never_averages_different_configurations(tmp_path, capsys):
    """WRONG 6: Vanilla at two learning rates and two lengths was averaged into one cost (and
    LfF's ratio to it); the accuracy tables' check now stops the cost table too."""
    root = tmp_path / "runs"
    for seed in range(2):
        write(root, seed, 60.0)
        write(root, seed, 61.0, {"lr": 0.01})
        write(root, seed, 62.0, {"steps": 1200})
        write(root, seed, 70.0, method="lff")
    with pytest.raises(ConfigError) as info:
        build_tables(load_records(RunStore(root)), "cost")
    assert "cmnist, 5.0, vanilla (protocol clean, preset ci)" in info.value.message
    assert "lr (0.001: 4 runs; 0.01: 2 runs)" in info.value.message
    assert "--where" in (info.value.hint or "")
    assert main(["report", "--out", str(root), "--table", "cost"]) == 2
    out, err = out_err(capsys)
    assert out == "" and err.startswith("error: ") and "Traceback" not in err
    args = ["report", "--out", str(root), "--table", "cost", "--where", "lr=0.001"]
    assert main([*args, "--where", "steps=240"]) == 0  # one configuration: a table
    assert "Training cost per run" in out_err(capsys)[0]


# ----------------------------------------------------------------------------- Markdown
def _hostile_table() -> Table:
    name = "A|B <script>alert(1)</script>"
    return Table(
        name="t",
        title="Title <b>bold</b>",
        caption="Caption of `x|y` with <img src=x onerror=alert(1)>",
        row_headers=("dataset", "ratio %"),
        columns=[Column("a", name), Column("b", "plain")],
        rows=[Row(("d|1", "5.0"), {"a": Cell(mean=1.0), "b": Cell(missing="failed | <i>")})],
        notes=["run_1: failed (RuntimeError: <script>x</script> | y)"],
    )


def _cells(line: str) -> list[str]:
    """The cells of a GitHub table line, split at unescaped pipes."""
    return [c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def test_markdown_escapes_pipes_and_raw_html():
    text = render([_hostile_table()], "markdown")
    assert not re.search(r"(?<!\\)<", text)  # no raw HTML: every < escaped
    assert r"\<script>" in text and r"\<img" in text
    table = [line for line in text.splitlines() if line.startswith("|")]
    assert len(table) == 3 and all(len(_cells(line)) == 4 for line in table)
    assert _cells(table[0])[2] == r"A\|B \<script>alert(1)\</script>"
    assert _cells(table[2])[0] == r"d\|1"
    assert "`x|y`" in text  # a code span outside a table keeps its text


def test_html_escapes_the_same_text():
    text = render([_hostile_table()], "html")
    assert "<script>" not in text and "<img" not in text and "<b>" not in text
    assert "A|B &lt;script&gt;" in text


# ----------------------------------------------------------------------------- bench compare
def test_compare_with_one_seed_says_no_test_was_possible(tmp_path, capsys):
    """Before: a header about "the 0 tests below" and a column `seeds (α/0)`."""
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 5.0, 0, 60.0)
    write_run(root, "lff", "cmnist", 5.0, 0, 70.0)
    assert main(["compare", "vanilla", "lff", "--out", str(root)]) == 0
    out, err = out_err(capsys)
    assert "α/0" not in out and "0 tests" not in out and "p (Holm)" not in out
    assert "No test: every cell has fewer than 2 finished seeds of A or of B" in out
    assert "-10.00" in out and "none (n < 2)" in out  # the means are still there
    assert err.count("\n") == 1 and err.startswith("note: no test: ")


def test_compare_says_why_a_method_has_no_runs_and_lists_the_stores(tmp_path, capsys):
    """Before: `hint: methods there: lff`, the methods asked for only, and no reason."""
    root = tmp_path / "runs"
    for seed in range(2):
        write_run(root, "vanilla", "cmnist", 5.0, seed, 60.0 + seed)
        write_run(root, "lff", "cmnist", 5.0, seed, 70.0 + seed)
        write_run(root, "etf_debias", "cmnist", 5.0, seed, 80.0 + seed)
    write_run(root, "sd", "cmnist", 5.0, 0, state="failed", note="boom")
    _foreign_copy(write_run(root, "end", "cmnist", 5.0, 0, 1.0).path, "mine", "cmnist")
    out = str(root)
    for asked, says in (
        ("disent", "the store has no runs of it"),
        ("nosuch", "no such method is registered"),
        ("sd", "its only run is not done (1 failed)"),
        ("mine", "its 1 run is of a plugin that is not loaded"),
    ):
        assert main(["compare", "vanilla", asked, "--out", out]) == 2
        err = out_err(capsys)[1]
        first, hint = err.splitlines()[-2:]  # after the note on the plugin's runs
        assert first.startswith(f"error: no finished runs of {asked!r} in --out {out}")
        assert says in first and "Traceback" not in err
        assert hint.endswith("methods there with finished runs: end, etf_debias, lff, vanilla")
    assert "BENCH_PLUGINS=" in hint  # the last: how to load the plugin
    assert main(["compare", "vanilla", "lff", "--out", out, "--dataset", "bar"]) == 2
    assert "its runs are all left out by --dataset bar" in out_err(capsys)[1]


def test_compare_of_runs_without_spread_prints_no_raw_scipy_warning(tmp_path, capsys):
    """The same difference on every paired seed (or one cell the same on every seed): scipy
    warned "Precision loss occurred ..." on the console; now no warning, and exact numbers."""
    root = tmp_path / "runs"
    for seed in range(3):
        write_run(root, "vanilla", "cmnist", 5.0, seed, 61.0 + seed)  # paired: always +1
        write_run(root, "lff", "cmnist", 5.0, seed, 60.0 + seed)
        write_run(root, "sd", "cmnist", 5.0, seed + 10, 50.0)  # Welch: no spread in B
        write_run(root, "end", "cmnist", 5.0, seed, 61.0 + seed)  # equal on every seed
    request = CompareRequest("vanilla", ("lff", "sd", "end"), out=root)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        text = compare_text(request, "csv")
    rows = {r.split(",")[4]: r.split(",") for r in text.splitlines()[1:]}
    assert rows["lff"][12:14] == ["paired t", "0.0"]  # certain: no spread at all
    assert rows["sd"][12] == "Welch t" and 0 < float(rows["sd"][13]) < 0.05
    assert rows["end"][12:14] == ["paired t", "1.0"]
    assert capsys.readouterr().err == ""


# ----------------------------------------------------------------------------- -o files
@pytest.fixture
def one_run(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    write_run(root, "vanilla", "cmnist", 5.0, 0, 60.0)
    return root


def test_report_o_replaces_the_file_atomically(one_run, tmp_path, capsys, monkeypatch):
    """A kill -9 during `bench report -o F` left F empty (written in place, truncated first):
    now the text goes to a temporary file in F's folder, renamed over F when complete."""
    target = tmp_path / "tables" / "report.md"
    target.parent.mkdir()
    target.write_text("old\n")
    seen: list[tuple[Path, Path, str]] = []
    real = os.replace

    def replace(src: Any, dst: Any) -> None:
        seen.append((Path(src), Path(dst), Path(dst).read_text()))
        real(src, dst)

    monkeypatch.setattr("debias_bench.runs.jsonio.os.replace", replace)
    assert main(["report", "--out", str(one_run), "-o", str(target)]) == 0
    ((src, dst, before),) = seen
    assert dst == target and src.parent == target.parent and before == "old\n"
    assert "| cmnist" in target.read_text() and sorted(target.parent.iterdir()) == [target]
    assert out_err(capsys)[1].startswith(f"wrote {target}")


def test_report_o_on_a_full_disk_is_one_error_and_leaves_the_file(
    one_run, tmp_path, capsys, monkeypatch
):
    """Before: a traceback, exit 1 and a partial file."""
    target = tmp_path / "report.md"
    target.write_text("old\n")

    def full(fd: int) -> None:
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr("debias_bench.runs.jsonio.os.fsync", full)
    assert main(["report", "--out", str(one_run), "-o", str(target)]) == 2
    err = out_err(capsys)[1]
    assert err.startswith(f"error: -o {target}: cannot write it (no space left on the device)")
    assert err.count("\n") == 2 and "Traceback" not in err  # the error and its hint
    assert target.read_text() == "old\n" and sorted(tmp_path.iterdir()) == [target, one_run]


@pytest.mark.parametrize("where", ["folder", "under a file", "uncreatable"])
def test_report_o_that_cannot_be_a_file_is_one_error_naming_it(one_run, tmp_path, capsys, where):
    """Before: IsADirectoryError / NotADirectoryError tracebacks, exit 1."""
    (tmp_path / "plain").write_text("x")
    target = {
        "folder": tmp_path,
        "under a file": tmp_path / "plain" / "report.md",
        "uncreatable": Path("/proc/no-such-folder/report.md"),
    }[where]
    assert main(["report", "--out", str(one_run), "-o", str(target)]) == 2
    out, err = out_err(capsys)
    assert out == "" and err.startswith(f"error: -o {target}") and "Traceback" not in err
    assert len(err.splitlines()) == 2


def test_report_plot_says_why_no_critical_difference_diagram(one_run, tmp_path, capsys):
    """A one-cell table with --interval: before, "wrote 2 plot files" and no word on the
    diagram --plot promises with --interval."""
    plots = tmp_path / "plots"
    args = ["report", "--out", str(one_run), "--table", "synthetic", "--interval"]
    assert main([*args, "--plot", str(plots)]) == 0
    err = out_err(capsys)[1]
    (line,) = err.splitlines()
    assert line.startswith(f"note: wrote 2 plot files under {plots} (1 accuracy-against-ratio")
    assert line.endswith(
        "no critical-difference diagram: synthetic (protocol official, preset paper) has 1 cell "
        "and 1 method with a number in every cell, where a ranking needs at least 2 cells and 3 "
        "methods"
    )
    assert len(list(plots.iterdir())) == 2


# ----------------------------------------------------------------------------- --ratios
def test_a_ratio_that_is_not_there_is_named_as_asked(tmp_path, capsys):
    """`--ratios 5.00000001` said "no ratio 5% (has 0.5, 1, 2, 5)": the value asked for
    printed with :g, as if it were one of them."""
    args = ["run", "--preset", "ci", "--protocol", "clean", "--device", "cpu", "--methods"]
    args += ["vanilla", "--datasets", "cmnist", "--seeds", "0", "--out", str(tmp_path / "r")]
    assert main([*args, "--ratios", "5.00000001", "--dry-run"]) == 2
    err = out_err(capsys)[1]
    assert "no ratio 5.00000001% (has 0.5, 1, 2, 5)" in err and "Traceback" not in err
    assert main([*args, "--ratios", "5.00000001,0.5", "--dry-run"]) == 0
    assert "note: cmnist: no ratio 5.00000001% (has 0.5, 1, 2, 5); left out" in out_err(capsys)[1]
