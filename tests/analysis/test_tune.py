"""bench tune: per-key seeded sampling, selection on validation only, tuned.yaml, end to end."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import yaml
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from support.processes import run_bench

from debias_bench.analysis import tuning
from debias_bench.analysis.tuning import (
    CellSearch,
    TunedCell,
    TunedFile,
    choose,
    load_tuned,
    read_tuned,
    search_space,
    write_tuned,
)
from debias_bench.analysis.tuning_report import TunedView, split_tuned, tuned_table
from debias_bench.cli import build_parser, main
from debias_bench.commands.tune import request_of
from debias_bench.config.hparams import HParam
from debias_bench.config.run_config import make_config
from debias_bench.config.search import Around
from debias_bench.errors import ConfigError, FailReason
from debias_bench.registry import DATASETS, METHODS
from debias_bench.reporting import load_records
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.tune import plan_cells, score_cell

SPACE = {
    "lr": FloatDistribution(1e-4, 1e-2, log=True),
    "weight_decay": FloatDistribution(1e-6, 1e-3, log=True),
}


def draws(space, n=6, seed=0, method="vanilla", dataset="cmnist", ratio=1.0):
    return [t.values for t in CellSearch(method, dataset, ratio, space, seed).ask(n)]


# ------------------------------------------------------------------------- sampling
def test_sampling_is_deterministic_and_seeded_per_cell():
    first = draws(SPACE)
    assert first == draws(SPACE)
    assert first[0] == {}  # trial 0: the official configuration
    assert len({v["lr"] for v in first[1:]}) == 5
    assert draws(SPACE, seed=1)[1:] != first[1:]
    assert draws(SPACE, ratio=5.0)[1:] != first[1:]
    assert draws(SPACE, method="lff")[1:] != first[1:]


def test_adding_a_key_or_trials_never_changes_the_other_draws():
    base = draws(SPACE)
    more = draws({**SPACE, "alpha": FloatDistribution(0.2, 1.0)})
    assert [{k: v[k] for k in SPACE} for v in more[1:]] == base[1:]
    assert {v["alpha"] for v in more[1:]} != {None}
    fewer = draws({"lr": SPACE["lr"]})
    assert [v["lr"] for v in fewer[1:]] == [v["lr"] for v in base[1:]]
    assert draws(SPACE, n=3) == base[:3]  # more trials extend the same sequence


def test_draws_stay_in_their_distributions_and_are_rounded():
    space = {
        "lr": SPACE["lr"],
        "members": IntDistribution(3, 7),
        "shortcut": CategoricalDistribution(["etf", "onehot", "random"]),
    }
    for values in draws(space, n=40)[1:]:
        assert 1e-4 <= values["lr"] <= 1e-2
        assert float(f"{values['lr']:.4g}") == values["lr"]
        assert isinstance(values["members"], int) and 3 <= values["members"] <= 7
        assert values["shortcut"] in ("etf", "onehot", "random")


def builtin(registry) -> list[str]:
    """The names ``registry`` holds from this package, not from plugins."""
    return [n for n in registry.names() if registry.get(n).__module__.startswith("debias_bench.")]


def test_every_method_has_a_valid_space_on_every_dataset():
    """Each built-in method's search: block parses against its declarations, and sampled values
    resolve into run configurations on every built-in dataset (plugins other tests loaded into
    this process, such as the ``faulty`` method, declare no search space)."""
    for method in builtin(METHODS):
        for dataset in builtin(DATASETS):
            space = search_space(method, dataset)
            assert {"lr", "weight_decay"} <= set(space), (method, dataset)
            ratio = DATASETS.get(dataset).spec.ratios[0]
            for values in draws(space, n=4, method=method, dataset=dataset, ratio=ratio):
                config = make_config(method, dataset, ratio, 0, overrides=values)
                assert all(config.hparams[k] == v for k, v in values.items())


@pytest.mark.parametrize(
    ("spec", "param"),
    [
        ({"uniform": [0.9, 0.1]}, HParam("q", "float", 0.7, "")),
        ({"log_uniform": [0.0, 1.0]}, HParam("wd", "float", 0.0, "", low=0)),
        ({"int": [1, 4]}, HParam("lr", "float", 1e-3, "")),
        ({"uniform": [0.0, 2.0]}, HParam("m", "float", 0.9, "", low=0, high=1)),
        ({"choice": ["etf", "nope"]}, HParam("p", "str", "etf", "", choices=("etf", "random"))),
        ({"normal": [0, 1]}, HParam("q", "float", 0.7, "")),
        ([0.1, 0.9], HParam("q", "float", 0.7, "")),
    ],
)
def test_bad_distributions_are_config_errors(spec, param):
    with pytest.raises(ConfigError):
        tuning._distribution(param.name, spec, param, "test.yaml search")


def test_dataset_entries_override_and_drop_keys(monkeypatch):
    block = {
        "search": {
            "defaults": {"lr": {"log_uniform": [1e-4, 1e-2]}, "weight_decay": {"uniform": [0, 1]}},
            "datasets": {"bar": {"lr": {"log_uniform": [1e-6, 1e-4]}, "weight_decay": None}},
        }
    }
    monkeypatch.setattr(tuning, "method_yaml", lambda method: block)
    assert set(search_space("vanilla", "cmnist")) == {"lr", "weight_decay"}
    bar = search_space("vanilla", "bar")
    assert set(bar) == {"lr"} and bar["lr"].high == 1e-4
    block["search"]["defaults"]["nope"] = {"uniform": [0, 1]}
    with pytest.raises(ConfigError, match="nope"):
        search_space("vanilla", "cmnist")


def _bounds(dist) -> tuple[float, float]:
    return dist.low, dist.high


def test_declared_spaces_follow_each_recipe_and_the_yaml_overrides_them():
    """lr is declared a decade either side of the recipe's value, at most 3e-2: each dataset's
    space follows its recipe without a YAML entry; SelecMix's YAML narrows Colored MNIST's."""
    assert _bounds(search_space("lff", "bar")["lr"]) == (1e-6, 1e-4)  # recipe 1e-5
    assert _bounds(search_space("lff", "cmnist")["lr"]) == (1e-4, 1e-2)  # recipe 1e-3
    assert _bounds(search_space("disent", "cmnist")["lr"]) == (1e-3, 3e-2)  # 1e-2, capped
    assert _bounds(search_space("selecmix", "cmnist")["lr"]) == (5e-4, 2e-2)  # selecmix.yaml
    assert _bounds(search_space("groupdro", "cmnist")["weight_decay"]) == (
        1e-6,
        1.0,
    )  # yaml: up to the strong L2 it cites
    assert _bounds(search_space("vanilla", "cmnist")["weight_decay"]) == (1e-6, 1e-3)  # declared
    # q and the loss EMA are searched in LfF's family as declared, not in SelecMix's
    assert {"q", "ema_alpha"} <= set(search_space("lff_be", "cmnist"))
    assert not {"q", "ema_alpha"} & set(search_space("selecmix", "cmnist"))


def test_around_is_relative_and_needs_a_positive_value():
    assert Around(10, cap=3e-2).spec(1e-2) == {"log_uniform": [1e-3, 3e-2]}
    assert Around(10).spec(1e-3) == {"log_uniform": [1e-4, 1e-2]}  # exact bounds
    with pytest.raises(ConfigError, match="positive"):
        Around().spec(0.0)


PLUGIN = """
from dataclasses import dataclass

from debias_bench.config.hparams import EngineParams, hparam
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import register_method
from debias_bench.config.search import IntRange


@dataclass(frozen=True)
class WideParams(EngineParams):
    width: int = hparam(2, "a width", low=1, search=IntRange(1, 4))


@register_method("wide", display_name="Wide", citation="-", needs_bias_labels=False, cost="1")
class Wide(Vanilla):
    Params = WideParams
"""


def test_a_plugin_declares_its_space_on_its_fields_and_its_yaml_drops_a_key(tmp_path):
    """A path plugin's declared space reaches `bench config`'s search line; a YAML beside it
    with `null` leaves a key out on one dataset."""
    (tmp_path / "wide.py").write_text(PLUGIN)
    env = {**os.environ, "BENCH_PLUGINS": "./wide.py"}
    shown = run_bench("config", "wide", "cmnist", env=env, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.splitlines()[-1] == (
        "# bench tune searches: lr log_uniform 0.0001..0.01, "
        "weight_decay log_uniform 1e-06..0.001, width int 1..4"
    )
    (tmp_path / "wide.yaml").write_text("search:\n  datasets:\n    cmnist: {width: null}\n")
    shown = run_bench("config", "wide", "cmnist", env=env, cwd=tmp_path)
    assert "width" not in shown.stdout.splitlines()[-1], shown.stdout


# ------------------------------------------------------------------------- selection
def _result(valid: float, test: float) -> dict:
    metrics = {
        "accuracy": None,
        "aligned_accuracy": None,
        "conflicting_accuracy": None,
        "group_mean_accuracy": None,
    }
    chosen = {
        "step": 10,
        "epoch": 1.0,
        "valid": {**metrics, "accuracy": valid},
        "test": {**metrics, "accuracy": test},
    }
    return {
        "selections": {"last": chosen, "best_valid": chosen, "best_test": chosen},
        "train_time_s": 1.0,
        "device": "cpu",
    }


def _args(tmp_path: Path, *extra: str):
    return build_parser().parse_args(
        ["tune", "--methods", "vanilla", "--datasets", "toy", "--ratios", "5", "--trials", "3",
         "--seeds", "1", "--set", "epochs=2", "--launcher", "inline", "--device", "cpu",
         "--out", str(tmp_path / "runs"), *extra]
    )  # fmt: skip


def _plant(store: RunStore, cells, planted: dict[int, tuple[float, float]]) -> None:
    """Finished trial runs with the given (valid, test) accuracy per trial index."""
    for trial, configs in cells[0].trials:
        for config in configs:
            run = store.run(config.run_id)
            run.plan(config_json(config))
            run.transition(RunState.RUNNING, attempt=1)
            run.write_result(_result(*planted[trial.index]))
            run.transition(RunState.DONE, exit_code=0)


def test_winner_is_chosen_on_validation_never_on_test(tmp_path):
    """Trial 1 is the best on test and the worst on validation: trial 2 must win."""
    args = _args(tmp_path)
    cells, _ = plan_cells(request_of(args))
    store = RunStore(Path(args.out))
    _plant(store, cells, {0: (50.0, 50.0), 1: (10.0, 99.0), 2: (90.0, 5.0)})
    scored = score_cell(cells[0], store, "best_valid")
    assert [s.mean for s in scored] == [50.0, 10.0, 90.0]
    assert choose(scored).trial.index == 2

    # end to end: the planted trials are done, so bench tune only reruns the winner
    assert main(["tune", *_argv(args)]) == 0
    tuned = read_tuned(Path(args.out) / "tuned.yaml")
    (cell,) = tuned.cells
    assert cell.trial == 2 and cell.valid_accuracy == 90.0
    assert cell.hparams == {k: cells[0].trials[2][0].values[k] for k in cell.hparams}
    assert all(store.run(r).is_done() for r in cell.runs)
    assert not {r for t in cell.trials for r in t["runs"]} & set(cell.runs)


def test_a_diverged_trial_loses_and_a_crashed_one_is_a_problem(tmp_path, capsys):
    args = _args(tmp_path)
    cells, _ = plan_cells(request_of(args))
    store = RunStore(Path(args.out))
    _plant(store, cells, {0: (50.0, 50.0), 1: (10.0, 99.0), 2: (90.0, 5.0)})
    diverged = cells[0].trials[2][1][0]
    store.run(diverged.run_id).result_path.unlink()
    store.run(diverged.run_id).transition(
        RunState.FAILED, reason=FailReason.DIVERGED, error="diverged at step 3"
    )
    assert main(["tune", *_argv(args)]) == 0  # the search itself went fine
    assert read_tuned(Path(args.out) / "tuned.yaml").cells[0].trial == 0
    assert "trial 2 diverged" in capsys.readouterr().err
    crashed = cells[0].trials[1][1][0]
    store.run(crashed.run_id).result_path.unlink()
    store.run(crashed.run_id).transition(RunState.FAILED, reason=FailReason.CRASHED, error="boom")
    assert main(["tune", *_argv(args)]) == 1
    assert f"trial 1: {crashed.run_id} failed" in capsys.readouterr().err


def _argv(args) -> list[str]:
    return ["--methods", args.methods, "--datasets", args.datasets, "--ratios", args.ratios,
            "--trials", str(args.trials), "--seeds", args.seeds, "--set", "epochs=2",
            "--launcher", "inline", "--device", "cpu", "--out", args.out]  # fmt: skip


def test_unfinished_trials_cannot_win():
    scored = [
        tuning.Scored(tuning.Trial(0, {}), ["a", "b"], [40.0, 42.0]),
        tuning.Scored(tuning.Trial(1, {}), ["c", "d"], [99.0, None]),  # one seed failed
    ]
    assert choose(scored).trial.index == 0
    assert choose([scored[1]]) is None
    tie = [tuning.Scored(tuning.Trial(i, {}), [str(i)], [50.0]) for i in (0, 1)]
    assert choose(tie).trial.index == 0


def test_tuning_and_rerun_seeds_must_differ(tmp_path, capsys):
    code = main(["tune", *_argv(_args(tmp_path))[:-2], "--tune-seeds", "0,1", "--out", "x"])
    assert code == 2
    assert "both --tune-seeds and --seeds" in capsys.readouterr().err


# ------------------------------------------------------------------------- tuned.yaml
def _tuned_file() -> TunedFile:
    cell = TunedCell(
        method="etf_debias",
        dataset="cmnist",
        ratio=1.0,
        hparams={"alpha": 0.5767, "lr": 0.001787, "weight_decay": 2.8e-05},
        trial=1,
        valid_accuracy=47.2,
        trials=[{"trial": 0, "hparams": {}, "valid_accuracy": 42.5, "runs": ["a"]}],
        runs=["b", "c"],
    )
    return TunedFile("clean", "ci", "best_valid", 2, [0], [1, 2], 0, {"eval_every": 60}, [cell])


def test_tuned_yaml_round_trips(tmp_path):
    tuned = _tuned_file()
    path = tmp_path / "tuned.yaml"
    write_tuned(path, tuned)
    assert read_tuned(path) == tuned
    values = load_tuned(path)
    assert values == {
        ("etf_debias", "cmnist", 1.0): {
            "eval_every": 60,
            "alpha": 0.5767,
            "lr": 0.001787,
            "weight_decay": 2.8e-05,
        }
    }


def test_tuned_yaml_reruns_the_same_runs_through_bench_run(tmp_path, capsys):
    """`bench run --hparams DIR/tuned.yaml` on the rerun seeds finds exactly the reruns of the
    winner, done (the --set values of the search travel in the file)."""
    args = _args(tmp_path)
    cells, _ = plan_cells(request_of(args))
    _plant(RunStore(Path(args.out)), cells, {0: (50.0, 50.0), 1: (10.0, 99.0), 2: (90.0, 5.0)})
    assert main(["tune", *_argv(args)]) == 0
    capsys.readouterr()
    code = main(
        ["run", "--methods", "vanilla", "--datasets", "toy", "--ratios", "5", "--seeds", "1",
         "--hparams", str(Path(args.out) / "tuned.yaml"), "--out", args.out, "--dry-run"]
    )  # fmt: skip
    assert code == 0
    listed = [line.split() for line in capsys.readouterr().out.splitlines()]
    assert listed == [["done", r] for r in read_tuned(Path(args.out) / "tuned.yaml").cells[0].runs]


def test_a_broken_tuned_file_is_a_config_error(tmp_path):
    path = tmp_path / "tuned.yaml"
    path.write_text(yaml.safe_dump({"version": 1, "cells": [{"method": "x"}]}))
    with pytest.raises(ConfigError):
        load_tuned(path)
    with pytest.raises(ConfigError):
        load_tuned(tmp_path / "missing.yaml")


# ------------------------------------------------------------------------- report
def test_report_keeps_search_runs_out_of_the_official_tables(tmp_path):
    args = _args(tmp_path)
    cells, _ = plan_cells(request_of(args))
    store = RunStore(Path(args.out))
    _plant(store, cells, {0: (50.0, 50.0), 1: (10.0, 99.0), 2: (90.0, 5.0)})
    assert main(["tune", *_argv(args)]) == 0
    records = load_records(store)
    official, view = split_tuned(Path(args.out), records)
    assert isinstance(view, TunedView)
    trials = {t["trial"]: t["runs"] for t in view.tuned.cells[0].trials}
    # issue 39.13: trial 0 is the official configuration, but on the tuning seed: a tuning run
    assert not set(official["run_id"]) & {r for runs in trials.values() for r in runs}
    from debias_bench.reporting import ReportOptions

    table = tuned_table(view, ReportOptions(selection="best_valid", ours=None))
    assert [r.labels[-1] for r in table.rows] == ["official", "tuned"]
    assert table.rows[0].cells["vanilla"].missing == "not run"  # official not run on seed 1
    assert table.rows[1].cells["vanilla"].has_value
    assert "among 3 trial(s)" in table.caption and "`best_valid` checkpoint" in table.caption


# ------------------------------------------------------------------------- real data
@pytest.mark.slow
@pytest.mark.realdata
def test_ci_tune_of_two_methods_on_real_colored_mnist(tmp_path, raw_root, data_root, capsys):
    """2 trials x 2 methods on Colored MNIST 1 % (ci preset) through the local launcher, the
    winners rerun on seeds 1 and 2; a second call finds everything done."""
    out = tmp_path / "runs"
    argv = ["tune", "--methods", "vanilla,etf_debias", "--datasets", "cmnist", "--ratios", "1",
            "--trials", "2", "--seeds", "1,2", "--preset", "ci", "--protocol", "clean",
            "--launcher", "local", "--workers", "1", "--device", "cpu", "--out", str(out),
            "--raw-root", str(raw_root), "--data-root", str(data_root)]  # fmt: skip
    assert main(argv) == 0
    tuned = read_tuned(out / "tuned.yaml")
    assert [(c.method, c.dataset, c.ratio) for c in tuned.cells] == [
        ("vanilla", "cmnist", 1.0),
        ("etf_debias", "cmnist", 1.0),
    ]
    store = RunStore(out)
    for cell in tuned.cells:
        assert len(cell.trials) == 2 and all(t["valid_accuracy"] for t in cell.trials)
        best = max(cell.trials, key=lambda t: (t["valid_accuracy"], -t["trial"]))
        assert cell.trial == best["trial"]
        assert len(cell.runs) == 2 and all(store.run(r).is_done() for r in cell.runs)
    runs_before = sorted(p.name for p in out.iterdir())
    capsys.readouterr()
    assert main(argv) == 0
    assert "4 runs (4 already done)" in capsys.readouterr().err
    assert sorted(p.name for p in out.iterdir()) == runs_before
    assert main(["report", "--out", str(out), "--selection", "best_valid"]) == 0
    report = capsys.readouterr().out
    assert "Official configurations against tuned ones" in report
    assert "Cost of tuning: every trial counted" in report
