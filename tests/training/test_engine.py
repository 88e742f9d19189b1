from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from support.asserts import assert_close_nested
from support.faulty_methods import HiddenState
from support.planted import plant

from debias_bench.config.hparams import EngineParams
from debias_bench.config.run_config import make_config
from debias_bench.config.selection import SELECTIONS
from debias_bench.errors import ConfigError, Interrupted
from debias_bench.launchers.run_one import run_one
from debias_bench.registry import METHODS, register_method
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run

TINY = {"steps": 24, "eval_every": 8, "batch_size": 32}


def _config(method="etf_debias", seed=0, **overrides):
    return make_config(method, "toy", 20, seed, protocol="clean", overrides={**TINY, **overrides})


@pytest.mark.parametrize("method", ["vanilla", "etf_debias"])
def test_same_seed_same_numbers(tmp_path, toy_place, method):
    config = _config(method)
    a = train_run(
        config, RunStore(tmp_path / "a").run(config.run_id), toy_place, torch.device("cpu")
    )
    b = train_run(
        config, RunStore(tmp_path / "b").run(config.run_id), toy_place, torch.device("cpu")
    )
    assert_close_nested(a["selections"], b["selections"])


@pytest.mark.parametrize("stop_at", [8, 13])  # at an evaluation, and between two
def test_interrupted_then_resumed_equals_uninterrupted(tmp_path, toy_place, stop_at):
    config = _config("etf_debias", lr_step_epochs=0.5, lr_gamma=0.5)  # scheduler state matters too
    cpu = torch.device("cpu")
    whole_dir = RunStore(tmp_path / "whole").run(config.run_id)
    whole = train_run(config, whole_dir, toy_place, cpu)

    run_dir = RunStore(tmp_path / "split").run(config.run_id)
    with pytest.raises(Interrupted):
        train_run(config, run_dir, toy_place, cpu, should_stop=lambda step: step == stop_at)
    assert run_dir.checkpoint_path.is_file() and not run_dir.is_done()
    resumed = train_run(config, run_dir, toy_place, cpu)

    assert_close_nested(resumed["selections"], whole["selections"])
    steps = [r["step"] for r in run_dir.metrics()]
    assert steps == [8, 16, 24]  # no duplicate records
    for a, b in zip(run_dir.metrics(), whole_dir.metrics(), strict=True):
        assert_close_nested(
            {k: a[k] for k in ("valid", "test", "train")},
            {k: b[k] for k in ("valid", "test", "train")},
        )


def test_result_json_has_the_contract_keys(tmp_path, toy_place):
    config = _config()
    run_dir = RunStore(tmp_path).run(config.run_id)
    result = train_run(config, run_dir, toy_place, torch.device("cpu"))
    on_disk = json.loads(run_dir.result_path.read_text())
    assert on_disk["selections"] == json.loads(json.dumps(result["selections"]))
    for key in ("method", "dataset", "ratio", "seed"):
        assert key in on_disk
    assert on_disk["ratio"] == 20.0
    assert set(on_disk["selections"]) == set(SELECTIONS)  # the toy valid split gives an iid one
    assert (on_disk["run_id"], on_disk["config_digest"]) == (config.run_id, config.digest)
    for chosen in on_disk["selections"].values():
        for split in ("valid", "test"):
            m = chosen[split]
            for key in ("accuracy", "aligned_accuracy", "conflicting_accuracy"):
                assert 0 <= m[key] <= 100
            assert len(m["per_class_accuracy"]) == 4 and len(m["group_accuracy"]) == 4
    last, best = on_disk["selections"]["last"], on_disk["selections"]["best_test"]
    assert best["test"]["accuracy"] >= last["test"]["accuracy"]
    assert last["step"] == 24


def test_sweep_records_failures_and_skips_done_runs(tmp_path, toy_place):
    store = RunStore(tmp_path)
    cpu = torch.device("cpu")
    good = _config("vanilla")
    assert run_one(good, store, toy_place, cpu).state == "done"
    again = run_one(good, store, toy_place, cpu)
    assert again.state == "done" and not again.ran

    with pytest.raises(ConfigError, match="optimizer='adagrad' is not valid"):
        _config("vanilla", optimizer="adagrad")  # caught when the grid is expanded
    # a config that slipped past the checks (an old config.json) fails at run time, recorded
    bad = dataclasses.replace(good, hparams={**good.hparams, "optimizer": "adagrad"})
    outcome = run_one(bad, store, toy_place, cpu)
    assert outcome.state == "failed" and "unknown optimizer" in outcome.note
    status = store.run(bad.run_id).status()
    assert status["state"] == "failed" and status["exit_code"] == 1 and status["attempt"] == 1
    assert run_one(bad, store, toy_place, cpu).ran is False  # not retried by default
    assert run_one(bad, store, toy_place, cpu, retry_failed=True).state == "failed"
    assert store.run(bad.run_id).status()["attempt"] == 2


def test_a_run_whose_process_died_is_reported_dead(tmp_path):
    run_dir = plant(RunStore(tmp_path))
    run_dir.transition(RunState.RUNNING)
    assert run_dir.effective_state() == "running"  # this very process
    status = run_dir.status()
    status["pid"] = 2**22 + 12345  # no such process
    run_dir.status_path.write_text(json.dumps(status))
    assert run_dir.effective_state() == "dead"


@pytest.fixture
def hidden_state():
    """``HiddenState`` registered for one test."""
    register_method("hidden_state", display_name="HiddenState", citation="test fixture",
                    needs_bias_labels=False)(HiddenState)  # fmt: skip
    yield "hidden_state"
    METHODS.unregister("hidden_state")


@pytest.mark.parametrize("where", ["list", "object"])
def test_a_method_whose_state_a_checkpoint_would_lose_is_refused_before_it_trains(
    tmp_path, toy_place, hidden_state, where, monkeypatch
):
    updates = []
    monkeypatch.setattr(HiddenState, "update", lambda self, batch: updates.append(1))
    config = _config(hidden_state, hidden=where)
    run_dir = RunStore(tmp_path).run(config.run_id)
    with pytest.raises(ConfigError, match="attribute 'memory' holds tensors"):
        train_run(config, run_dir, toy_place, torch.device("cpu"))
    assert not updates and not run_dir.checkpoint_path.exists() and not run_dir.metrics()


def test_plain_tensor_attributes_are_checkpointed(tmp_path, toy_place):
    """GroupDRO's group weights are a bare tensor attribute: saved with the modules."""
    config = _config("groupdro")
    run_dir = RunStore(tmp_path).run(config.run_id)
    train_run(config, run_dir, toy_place, torch.device("cpu"))
    saved = run_dir.load_checkpoint()["method"]
    assert {"model", "optimizer", "group_weights", "group_counts"} <= set(saved)
    weights = saved["group_weights"]
    assert not torch.allclose(weights, torch.full_like(weights, 1 / len(weights)))  # trained


def _params_classes(cls: type) -> list[type]:
    return [cls] + [c for sub in cls.__subclasses__() for c in _params_classes(sub)]


@pytest.mark.parametrize("method", ["vanilla", "lff", "selecmix"])
def test_a_run_builds_its_typed_params_once(tmp_path, toy_place, monkeypatch, method):
    """Data subsets, threads, the method, its models, optimisers and schedulers all read the
    run's one params object (``RunConfig.params``): built once per run (three times before:
    the data, the thread pin and the method each built their own from the dict)."""
    config = _config(method)  # every method's module imported: its Params class exists
    built = []
    for cls in _params_classes(EngineParams):
        if "__init__" in vars(cls):  # every dataclass: its own generated __init__
            init = vars(cls)["__init__"]

            def counted(self, *args, _init=init, **kwargs):
                built.append(type(self).__name__)
                _init(self, *args, **kwargs)

            monkeypatch.setattr(cls, "__init__", counted)
    assert run_one(config, RunStore(tmp_path), toy_place, torch.device("cpu")).state == "done"
    assert built == [type(config.params).__name__]
