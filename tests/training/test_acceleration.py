"""Speed settings: bf16 autocast, channels-last weights, torch.compile, device-resident data."""

from __future__ import annotations

import pytest
import torch

from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.runs.store import RunStore
from debias_bench.training.acceleration import accelerate, amp_dtype, autocast, full_precision
from debias_bench.training.engine import train_run
from debias_bench.training.method import Method

CPU = torch.device("cpu")
TINY = {"steps": 12, "eval_every": 6, "batch_size": 64}


def test_amp_choices():
    assert amp_dtype("none", CPU) is None and amp_dtype(None, CPU) is None
    assert amp_dtype("bf16", CPU) is torch.bfloat16
    assert amp_dtype("auto", CPU) is None  # bf16 only where a GPU runs it natively
    with pytest.raises(ConfigError, match="amp must be one of none, bf16, auto"):
        amp_dtype("fp8", CPU)


def test_forward_under_autocast_backward_and_step_in_full_precision():
    model = torch.nn.Linear(4, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    with autocast(amp_dtype("bf16", CPU), CPU):
        out = model(torch.randn(8, 4))
        assert out.dtype == torch.bfloat16
        with full_precision(CPU):
            assert not torch.is_autocast_enabled("cpu")
        Method.step(out.float().pow(2).mean(), (optimizer, None))
    assert model.weight.dtype == torch.float32 and not torch.equal(model.weight, before)


def test_bf16_run_trains_like_float32(tmp_path, toy_place):
    """Same seed, bf16 or float32: both learn the toy task, to accuracies a few points apart."""
    results = {}
    for amp in ("none", "bf16"):
        overrides = {**TINY, "steps": 40, "eval_every": 20, "amp": amp}
        config = make_config("etf_debias", "toy", 20, 0, protocol="clean", overrides=overrides)
        run = RunStore(tmp_path / amp).run(config.run_id)
        results[amp] = train_run(config, run, toy_place, CPU)["selections"]["last"]["test"]
    assert results["bf16"]["accuracy"] > 40 and results["none"]["accuracy"] > 40
    assert abs(results["bf16"]["accuracy"] - results["none"]["accuracy"]) < 10


def test_amp_is_in_the_run_id_speed_settings_are_not():
    base = make_config("vanilla", "toy", 20, 0)
    assert make_config("vanilla", "toy", 20, 0, overrides={"amp": "bf16"}).run_id != base.run_id
    for key, value in (("channels_last", True), ("compile", True)):
        assert make_config("vanilla", "toy", 20, 0, overrides={key: value}).run_id == base.run_id


def test_channels_last_converts_conv_weights_only_where_asked():
    def model():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3), torch.nn.Flatten())

    cpu_auto = model()
    accelerate(iter([cpu_auto]), {"channels_last": "auto"}, CPU)
    assert cpu_auto[0].weight.is_contiguous()  # auto: CUDA only
    forced = model()
    accelerate(iter([forced]), {"channels_last": True}, CPU)
    assert forced[0].weight.is_contiguous(memory_format=torch.channels_last)
    assert not forced[0].weight.is_contiguous()


@pytest.mark.slow
def test_compiled_run_matches_eager(tmp_path, toy_place):
    """torch.compile changes speed, not the math: same run id, (nearly) the same numbers."""
    results = {}
    for compiled in (False, True):
        config = make_config(
            "vanilla", "toy", 20, 0, protocol="clean", overrides={**TINY, "compile": compiled}
        )
        run = RunStore(tmp_path / str(compiled)).run(config.run_id)
        results[compiled] = train_run(config, run, toy_place, CPU)["selections"]["last"]["test"]
    assert abs(results[True]["accuracy"] - results[False]["accuracy"]) < 2
