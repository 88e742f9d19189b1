"""Step counts declared ``run_share=True`` keep their share of a run that a preset, ``--epochs``
or ``--set steps=`` shortens (debias_bench.config.run_length)."""

from __future__ import annotations

import pytest

from debias_bench.config import run_length
from debias_bench.config.run_config import RunRequest, resolve_layers
from debias_bench.errors import ConfigError


def _swap(preset: str = "paper", ratio: float = 1.0, **kwargs) -> tuple[int, int, str]:
    """DisEnt's swap start and decay period (both run_share) and the swap start's source."""
    resolved = resolve_layers(RunRequest("disent", "cmnist", ratio, preset=preset, **kwargs))
    values, sources = resolved.values, resolved.sources
    return values["curr_step"], values["lr_decay_step"], sources["curr_step"]


def test_a_preset_keeps_the_recipes_share_of_the_run():
    """The recipe swaps at 10,000 of 50,000 steps: 20 % of every shorter run."""
    assert _swap("paper")[:2] == (10000, 10000)
    assert _swap("ci") == (
        48,
        48,
        "disent.yaml datasets.cmnist, scaled to the run (240 of 50000 steps)",
    )
    # quick: 30 epochs of ceil(54,000 / 256) = 211 batches (Colored MNIST's declared size)
    assert _swap("quick")[:2] == (1266, 1266)
    assert _swap("smoke")[:2] == (4, 4)  # 20 steps


def test_epochs_and_set_steps_scale_it_too_but_a_given_value_is_kept():
    assert _swap(epochs=10)[:2] == (422, 422)  # 2,110 steps
    assert _swap(overrides={"steps": 500})[:2] == (100, 100)
    assert _swap("ci", overrides={"curr_step": 7})[:2] == (7, 48)
    assert _swap("ci", overrides={"curr_step": 7})[2] == "--set"


def test_a_stage_that_should_not_follow_the_run_keeps_its_preset_value():
    """LfF+BE's committee is not run_share: its YAML gives 20 steps to the 60-step ci run."""
    values = resolve_layers(RunRequest("lff_be", "cifar10c", 1.0, preset="ci")).values
    assert values["committee_steps"] == 20


def test_an_unknown_training_set_size_is_a_named_error(monkeypatch):
    """A steps recipe shortened to epochs needs the dataset's size; without one the error names
    the keys and the two fixes."""
    monkeypatch.setattr(run_length, "train_size", lambda dataset, ratio: None)
    with pytest.raises(ConfigError, match="curr_step, lr_decay_step") as caught:
        resolve_layers(RunRequest("disent", "cmnist", 1.0, preset="quick"))
    assert "train_sizes" in (caught.value.hint or "")
    # both lengths counted in epochs of the same batches: no size needed
    recipe = {"epochs": 100, "steps": None, "batch_size": 256, "train_limit": None}
    assert run_length._lengths(recipe, {**recipe, "epochs": 30}, "cmnist", 1.0, ["k"]) == (
        100.0,
        30.0,
    )
