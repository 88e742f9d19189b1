"""`bench report` end to end on a run store: formats, files, plots, and a real LaTeX engine."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import pandas as pd
import pytest
from test_report import fixed_store, paper_records, write_run

from debias_bench.cli import main
from debias_bench.reporting import ReportOptions, build_tables, load_paper, render

ENGINES = ("pdflatex", "tectonic")


def bench_report(capsys, *args: str) -> str:
    assert main(["report", *args]) == 0
    return capsys.readouterr().out


def test_default_is_markdown_of_all_tables(tmp_path, capsys):
    out = bench_report(capsys, "--out", str(fixed_store(tmp_path / "runs")))
    assert "| cmnist" in out and "ETF-Debias" in out and "Vanilla" in out and "±" in out
    assert "Class-wise accuracy on BAR" in out and "Training cost per run" in out
    assert re.search(
        r"cmnist_lff_r1_s2_[0-9a-f]{10}: failed \(crashed: RuntimeError: out of memory\)", out
    )


def test_table_format_selection_and_ours(tmp_path, capsys):
    store = str(fixed_store(tmp_path / "runs"))
    last = bench_report(capsys, "--out", store, "--table", "synthetic")
    best = bench_report(capsys, "--out", store, "--table", "synthetic", "--selection", "best_test")
    assert "**82.17** ± 2.02 (+11.55)" in last  # ours: 80, 82.5, 84
    assert "**84.17** ± 2.02 (+11.55)" in best  # best_test is +2 on every run of the fixture
    assert "selection `best_test`" in best and "Class-wise" not in best
    plain = bench_report(capsys, "--out", store, "--table", "synthetic", "--ours", "none")
    assert "(+11.55)" not in plain and "**82.17** ± 2.02 |" in plain


def test_csv_is_one_line_per_cell(tmp_path, capsys):
    store = str(fixed_store(tmp_path / "runs"))
    text = bench_report(capsys, "--out", store, "--table", "synthetic", "--format", "csv")
    frame = pd.read_csv(io.StringIO(text))
    left_out = frame[frame["kind"] == "not in table"]
    assert sorted(note.split(": ")[1].split()[0] for note in left_out["missing"]) == [
        "failed", "pending", "running", "skipped"
    ]  # fmt: skip
    frame = frame[frame["kind"] != "not in table"]
    assert len(frame) == 2 * 3  # 2 ratios x 3 methods
    ours = frame[(frame["column"] == "etf_debias") & (frame["ratio %"] == 1.0)].iloc[0]
    assert ours["mean"] == pytest.approx(82.1666667) and ours["bold"] and ours["n"] == 3
    assert ours["protocol"] == "official" and ours["selection"] == "last"
    skipped = frame[(frame["column"] == "lff") & (frame["ratio %"] == 0.5)].iloc[0]
    assert skipped["missing"] == "skipped" and pd.isna(skipped["mean"])


def test_output_file_and_plots(tmp_path, capsys):
    store = str(fixed_store(tmp_path / "runs"))
    target, plots = tmp_path / "tables" / "all.tex", tmp_path / "plots"
    main(["report", "--out", store, "--format", "latex", "-o", str(target), "--plot", str(plots)])
    err = capsys.readouterr().err
    assert f"wrote {target}" in err
    text = target.read_text()
    assert text.startswith(r"\documentclass") and text.count(r"\begin{table}") == 5
    names = sorted(p.name for p in plots.iterdir())
    assert names == sorted(
        f"{d}_official_paper_accuracy_last.{ext}" for d in ("bar", "cmnist", "toy")
        for ext in ("png", "pdf")
    )  # fmt: skip
    assert (plots / "cmnist_official_paper_accuracy_last.png").read_bytes()[:4] == b"\x89PNG"
    assert (plots / "cmnist_official_paper_accuracy_last.pdf").read_bytes()[:4] == b"%PDF"


def test_fragment_has_no_document(tmp_path, capsys):
    store = str(fixed_store(tmp_path / "runs"))
    text = bench_report(capsys, "--out", store, "--format", "latex", "--fragment")
    assert r"\documentclass" not in text and r"\begin{tabular}" in text


def _engine() -> list[str] | None:
    for name in ENGINES:
        path = shutil.which(name)
        if path:
            return (
                [path, "-interaction=nonstopmode", "-halt-on-error"]
                if name == "pdflatex"
                else [path]
            )
    return None


def compile_latex(text: str, where: Path) -> None:
    engine = _engine()
    if engine is None:
        pytest.skip(
            "no LaTeX engine on PATH (pdflatex or tectonic); on Debian: apt-get install "
            "texlive-latex-base texlive-latex-recommended"
        )
    source = where / "tables.tex"
    source.write_text(text)
    proc = subprocess.run(
        [*engine, source.name], cwd=where, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert (where / "tables.pdf").stat().st_size > 1000


def test_latex_compiles(tmp_path, capsys):
    """The golden store's tables and the paper's full layout (8 methods, paper rows)."""
    store = str(fixed_store(tmp_path / "runs"))
    text = bench_report(capsys, "--out", store, "--format", "latex", "--compare-paper")
    paper = build_tables(paper_records(), "all", ReportOptions(), load_paper())
    full = render(paper, "latex")
    body = full[full.index(r"\begin{table}") : full.index(r"\end{document}")]
    compile_latex(text.replace(r"\end{document}", body + r"\end{document}"), tmp_path)


def test_latex_with_interval_compiles_with_the_marks(tmp_path, capsys):
    """`bench report --format latex --interval`: intervals, ≈ and the ranks' caption compile."""
    store = str(fixed_store(tmp_path / "runs"))
    text = bench_report(capsys, "--out", store, "--format", "latex", "--interval")
    assert r"\dbci{77.15}{87.19}" in text and r"\dbtie{}" in text
    assert r"\providecommand{\dbtie}" in text and "Holm-corrected" in text
    bootstrap = bench_report(
        capsys, "--out", store, "--format", "latex", "--interval", "bootstrap", "--fragment"
    )
    assert "9999 resamples, seed 0" in bootstrap
    compile_latex(
        text.replace(r"\end{document}", bootstrap.split("\n", 1)[1] + r"\end{document}"), tmp_path
    )


def _foreign_copy(run: Path, method: str, dataset: str) -> Path:
    """A copy of ``run`` whose config names a method and dataset of a plugin not loaded."""
    copy = run.with_name(f"{dataset}_{method}_r5_s0_0123456789")
    shutil.copytree(run, copy)
    config = json.loads((copy / "config.json").read_text())
    config.update(method=method, dataset=dataset, run_id=copy.name)
    (copy / "config.json").write_text(json.dumps(config))
    return copy


def test_runs_of_a_plugin_not_loaded_are_named_with_the_way_to_load_it(tmp_path, capsys):
    """Issue 39.15: runs of a plugin that is not loaded: say how many, which names, and how
    to load it; exit 2 when nothing else can be reported."""
    root = tmp_path / "runs"
    known = write_run(root, "vanilla", "toy", 5.0, 0, 50.0)
    _foreign_copy(known.path, "mine", "tiny")
    assert main(["report", "--out", str(root), "--table", "other"]) == 0
    out, err = capsys.readouterr()
    assert "| toy" in out
    named = (
        "1 run of names no loaded plugin registers (dataset tiny: 1 run, method mine: "
        "1 run): left out of every table; load the plugin that registers them: BENCH_PLUGINS="
    )
    assert f"note: {named}" in err
    assert named in out  # issue 48: in the table's own output, not only on stderr
    for fmt in ("latex", "markdown", "csv", "html"):  # and in a file written with -o
        target = tmp_path / f"report.{fmt}"
        args = ["report", "--out", str(root), "--table", "other", "--format", fmt]
        assert main([*args, "-o", str(target)]) == 0
        assert "no loaded plugin registers" in target.read_text(), fmt
    capsys.readouterr()
    shutil.rmtree(known.path)  # only the plugin's runs: nothing to report
    assert main(["report", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nothing to report: 1 run of names no loaded plugin registers")
    assert "BENCH_PLUGINS" in err and "Traceback" not in err


def test_bench_status_lists_the_other_runs_and_names_a_plugin_not_loaded(tmp_path, capsys):
    """`bench status` on a store holding runs of a plugin that is not loaded: the other runs
    are listed, the plugin's named with how to load it; only the plugin's: exit 2, one error
    (before: `unknown dataset 'tiny'` while checking the run's code)."""
    root = tmp_path / "runs"
    known = write_run(root, "vanilla", "toy", 5.0, 0, 50.0)
    _foreign_copy(known.path, "mine", "tiny")
    (root / "notes").mkdir()  # a folder that is no run
    assert main(["status", "--out", str(root)]) == 0
    out, err = capsys.readouterr()
    assert known.run_id in out and "1 done" in out
    assert "note: 1 run of names no loaded plugin registers (dataset tiny: 1 run" in err
    # issue 48: every run folder is counted; the plugin's runs are listed as not loaded
    assert "1 done, 0 running, 1 not loaded, 0 failed, 0 pending (of 2)" in out
    assert "not loaded" in out.split(known.run_id)[0] + out.split(known.run_id)[1]
    assert "method mine and dataset tiny not registered" in out
    assert "1 folder under" in err and "holds no run" in err and ": notes" in err
    assert "BENCH_PLUGINS=my_module (or path/to/plugin.py) bench status" in err
    shutil.rmtree(known.path)
    assert main(["status", "--out", str(root)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: nothing to show: 1 run of names no loaded plugin registers")
    assert "Traceback" not in err
