"""``bench analyze amp`` (issue 51): each cell's runs under ``amp=bf16`` paired by seed with its
float32 runs, the project's paired t-interval of the difference, and the verdict ``amp=auto``
reads from the committed CSV (bf16 on a GPU only where the accuracy was kept)."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
import torch

from debias_bench.analysis.amp_parity import parity, to_csv
from debias_bench.cli import main
from debias_bench.config import amp_policy
from debias_bench.config.amp_policy import bf16_cells, read_rows
from debias_bench.reporting.significance import PAIRED
from debias_bench.training.acceleration import amp_dtype

GRID = ["--methods", "vanilla", "--datasets", "toy", "--ratios", "20", "--seeds", "0,1"]
GRID += ["--protocol", "clean", "--device", "cpu", "--set", "steps=8", "--set", "eval_every=4"]


@pytest.fixture(scope="module")
def both(tmp_path_factory) -> Path:
    """Vanilla on the toy set, seeds 0-1, in float32 and under bf16."""
    root = tmp_path_factory.mktemp("amp")
    for extra in ([], ["--set", "amp=bf16"]):
        args = [*GRID, *extra, "--out", str(root / "runs"), "--raw-root", str(root)]
        assert main(["run", *args]) == 0
    return root / "runs"


def test_a_store_of_both_precisions_gives_one_paired_cell_and_its_csv(both, tmp_path, capsys):
    csv = tmp_path / "parity.csv"
    assert main(["analyze", "amp", "--out", str(both), "-o", str(csv)]) == 0
    printed = capsys.readouterr()
    (row,) = read_rows(csv.read_text())
    assert [row[k] for k in ("dataset", "method", "n", "preset")] == [
        "toy",
        "vanilla",
        "2",
        "paper",
    ]
    low, diff, high = float(row["low"]), float(row["diff"]), float(row["high"])
    assert low <= diff <= high
    full = f"{row['float32']} ± {row['float32_sd']}"
    assert f"| toy | paper | 20 | Vanilla | 2 | {full} |" in printed.out
    assert "cells keep their accuracy under bf16" in printed.err


def test_no_cell_of_both_precisions_is_a_named_error(both, capsys):
    assert main(["analyze", "amp", "--out", str(both), "--preset", "quick"]) == 2
    assert "ran both in float32 and under bf16" in capsys.readouterr().err


def _frame(values: dict[int, float]) -> pd.DataFrame:
    rows = [
        {"dataset": "cmnist", "preset": "ci", "protocol": "clean", "ratio": 5.0}
        | {"method": "lff", "seed": seed, "accuracy": v}
        for seed, v in values.items()
    ]
    return pd.DataFrame(rows)


@pytest.mark.parametrize(("shift", "keeps"), [(-0.5, "True"), (-3.0, "False")])
def test_a_cell_keeps_its_accuracy_when_bf16_loses_less_than_the_seeds_spread(shift, keeps):
    full = {0: 70.0, 1: 72.0, 2: 74.0, 3: 71.0, 4: 73.0}  # sd 1.58
    half = {s: v + shift + 0.1 * s for s, v in full.items()}
    (cell,) = parity(_frame(full), _frame(half))
    assert cell.diff is not None and cell.diff.test == PAIRED
    assert cell.diff.diff == pytest.approx(shift + 0.2)
    assert read_rows(to_csv([cell]))[0]["keeps"] == keeps


def test_auto_chooses_bf16_only_on_a_gpu_and_only_for_a_cell_measured_to_keep(
    tmp_path, monkeypatch
):
    table = tmp_path / "amp_parity.csv"
    cells = parity(_frame({0: 70.0, 1: 72.0, 2: 74.0}), _frame({0: 70.1, 1: 71.9, 2: 74.2}))
    table.write_text(to_csv(cells))
    monkeypatch.setattr(amp_policy, "PARITY_CSV", table)
    amp_policy._verdicts.cache_clear()
    assert bf16_cells() == {("cmnist", "lff")}
    cpu = torch.device("cpu")
    assert amp_dtype("auto", cpu, ("cmnist", "lff")) is None  # never on a CPU
    assert amp_dtype("bf16", cpu, ("cmnist", "lff")) is torch.bfloat16  # asked for: given
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda: True)
    cuda = torch.device("cuda")
    assert amp_dtype("auto", cuda, ("cmnist", "lff")) is torch.bfloat16
    assert amp_dtype("auto", cuda, ("cmnist", "vanilla")) is None  # not measured
    amp_policy._verdicts.cache_clear()


def test_the_performance_page_shows_the_committed_cells_as_rendered():
    """docs/performance.md's bf16 table is the committed CSV that amp=auto reads, rendered."""
    from debias_bench.analysis.amp_parity import PARITY_CSV, render_markdown

    page = (Path(__file__).resolve().parents[2] / "docs" / "performance.md").read_text()
    section = page.split("## bf16 against float32", 1)[1].split("\n## ", 1)[0]
    assert PARITY_CSV.is_file(), f"{PARITY_CSV} is not committed: bench analyze amp -o writes it"
    assert render_markdown(read_rows(PARITY_CSV.read_text())) in section
    assert ("cmnist", "selecmix") not in bf16_cells() and ("cmnist", "lff") in bf16_cells()
    # measured at ci length on Corrupted CIFAR-10 (near chance): shown, never read by auto
    cifar = Path(__file__).resolve().parents[2] / "results" / "amp" / "cifar10c_ci.csv"
    assert render_markdown(read_rows(cifar.read_text())) in section
    assert not any(dataset == "cifar10c" for dataset, _ in bf16_cells())


def test_a_grid_asking_for_bf16_where_it_was_measured_to_lose_is_told_at_once(tmp_path, capsys):
    """SelecMix lost 38 points under bf16 on Colored MNIST: a grid that asks for it says so
    before anything runs (a dry run prints the plan); LfF, which kept its accuracy, does not."""
    args = ["run", "--methods", "selecmix,lff", "--datasets", "cmnist", "--ratios", "5"]
    args += ["--preset", "ci", "--set", "amp=bf16", "--out", str(tmp_path / "runs"), "--dry-run"]
    assert main(args) == 0
    err = capsys.readouterr().err
    assert "selecmix on cmnist under amp=bf16: measured to lose accuracy" in err
    assert "lff on cmnist under amp=bf16" not in err
