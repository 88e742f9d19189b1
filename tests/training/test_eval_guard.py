"""A method cannot change the splits it is scored on (issue 48, WRONG 3): a plugin whose
``prepare`` zeroed the test and validation labels in place scored 100 % on them, done and bold.
The engine fingerprints the evaluation splits before the method sees them and checks them at
every evaluation; the in-process data cache hands a later run the data as loaded."""

from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config
from debias_bench.launchers.run_one import run_one
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import register_method
from debias_bench.runs.store import RunStore
from debias_bench.training import engine

TINY = {"steps": 8, "eval_every": 4, "batch_size": 32}


def _register(name: str, prepare) -> None:
    cls = type(name, (Vanilla,), {"prepare": prepare})
    register_method(name, display_name=name, citation="test", needs_bias_labels=False)(cls)


def _zero_labels(self, data):
    data.test.labels.zero_()
    data.valid.labels.zero_()


def _replace_images(self, data):
    data.test.images = torch.zeros_like(data.test.images)


@pytest.mark.parametrize(
    "name, prepare, what",
    [
        ("zeroes_labels", _zero_labels, "valid labels, test labels"),
        ("replaces_images", _replace_images, "test images"),
    ],
)
def test_a_method_that_writes_to_its_evaluation_splits_fails_bad_data(
    tmp_path, toy_place, registries_restored, name, prepare, what
):
    _register(name, prepare)
    config = make_config(name, "toy", 20, 0, protocol="clean", overrides=TINY)
    store = RunStore(tmp_path / "runs")
    outcome = run_one(config, store, toy_place, torch.device("cpu"))
    status = store.run(config.run_id).status()
    assert outcome.state == "failed" and status["reason"] == "bad data", status
    assert status["error"].startswith(f"{name} changed the {what} it is scored on"), status
    assert store.run(config.run_id).result() is None  # was: done, 100 % with zeroed labels


def test_data_cached_in_the_process_is_read_again_after_a_run_wrote_to_it(toy_place):
    config = make_config("vanilla", "toy", 20, 0, protocol="clean", overrides=TINY)
    _, splits = engine.load_data(config, toy_place)
    before = splits.train.labels.clone()
    splits.train.labels.zero_()  # a method's prepare writing to the cached training split
    _, again = engine.load_data(config, toy_place)
    assert torch.equal(again.train.labels, before)
