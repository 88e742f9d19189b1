from __future__ import annotations

import pytest
import torch

from debias_bench.analysis.ablations import ABLATIONS, ablation_frame, ablation_grids, get_ablation
from debias_bench.cli import main
from debias_bench.config.grid import Grid, expand
from debias_bench.errors import UnknownNameError
from debias_bench.launchers.run_one import run_one
from debias_bench.runs.store import RunStore

TINY = {"steps": 4, "eval_every": 4, "batch_size": 32}


def test_alpha_ablation_expands_to_one_run_per_value_and_seed():
    grid = Grid(["vanilla", "etf_debias"], ["cmnist"], [1.0], [0, 1], overrides={"lr": 0.01})
    configs = [c for g in ablation_grids(ABLATIONS["alpha"], grid) for c in expand(g)[0]]
    assert len(configs) == 6 * 2
    assert {c.method for c in configs} == {"etf_debias"}
    assert sorted({c.hparams["alpha"] for c in configs}) == [0.0, 0.2, 0.4, 0.6, 0.8, 1.0]
    assert all(c.hparams["lr"] == 0.01 for c in configs)
    assert len({c.run_id for c in configs}) == 12


def test_unknown_ablation():
    with pytest.raises(UnknownNameError, match="alpha, prime"):
        get_ablation("beta")


@pytest.mark.parametrize("name", ["alpha", "prime"])
def test_tiny_ablation_runs_end_to_end_and_plots(tmp_path, toy_place, name):
    ablation = ABLATIONS[name]
    store = RunStore(tmp_path / "runs")
    grid = Grid(["etf_debias"], ["toy"], [20.0], [0], protocol="clean", overrides=TINY)
    for g in ablation_grids(ablation, grid):
        for config in expand(g)[0]:
            assert run_one(config, store, toy_place, torch.device("cpu")).state == "done"
    frame = ablation_frame(store, ablation)
    assert sorted(frame["value"].tolist(), key=str) == sorted(ablation.values, key=str)
    out = tmp_path / f"{name}.png"
    assert main(["analyze", "ablation", name, "--out", str(store.root), "-o", str(out)]) == 0
    assert out.stat().st_size > 5_000 and out.with_suffix(".pdf").is_file()


def test_each_ablation_reads_only_its_own_runs(tmp_path, toy_place):
    store = RunStore(tmp_path / "runs")
    grid = Grid(["etf_debias"], ["toy"], [20.0], [0], protocol="clean", overrides=TINY)
    for name in ("alpha", "prime"):
        for g in ablation_grids(ABLATIONS[name], grid):
            for config in expand(g)[0]:
                run_one(config, store, toy_place, torch.device("cpu"))
    alpha = ablation_frame(store, ABLATIONS["alpha"])
    prime = ablation_frame(store, ABLATIONS["prime"])
    assert len(alpha) == 6  # not 7: the random-prime run (alpha 0.8) is not an alpha point
    assert len(prime) == 2  # etf (shared with alpha = 0.8) and random
