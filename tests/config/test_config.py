from __future__ import annotations

import pytest

from debias_bench.config.run_config import (
    RunConfig,
    RunRequest,
    make_config,
    parse_overrides,
    preset_data_options,
    resolve_hparams,
    resolve_layers,
    yaml_keys,
)
from debias_bench.datasets import LISTED_FIRST as BUILTIN_DATASETS
from debias_bench.errors import ConfigError, UnknownNameError
from debias_bench.methods.etf_debias import ETFDebias
from debias_bench.registry import DATASETS, METHODS


def test_paper_hparams_for_etf_on_cmnist():
    hp = resolve_hparams("etf_debias", "cmnist")
    assert (hp["lr"], hp["weight_decay"], hp["batch_size"]) == (1e-3, 1e-5, 256)
    assert (hp["alpha"], hp["epochs"], hp["backbone"]) == (0.8, 200, "mlp")
    assert hp["input_div255"] is True  # official: a quirk of its code (etf_debias.yaml)
    assert (hp["lr_step_epochs"], hp["lr_gamma"]) == (10, 1.01)


def test_clean_protocol_drops_the_official_quirks():
    hp = resolve_hparams("etf_debias", "cmnist", protocol="clean")
    assert hp["input_div255"] is False
    assert hp["lr_gamma"] == 1.0


def test_layers_apply_in_order():
    hp = resolve_hparams(
        "etf_debias", "cmnist", preset="smoke", epochs=3, overrides={"lr": 0.5, "steps": None}
    )
    assert hp["epochs"] == 3 and hp["steps"] is None and hp["lr"] == 0.5
    assert hp["eval_limit"] == 500  # from the preset


def test_overrides_parse_yaml_and_floats():
    assert parse_overrides(["lr=1e-3", "alpha=0", "prime=random", "eval_limit=null"]) == {
        "lr": 1e-3,
        "alpha": 0,
        "prime": "random",
        "eval_limit": None,
    }
    with pytest.raises(ConfigError, match="bad override"):
        parse_overrides(["lr"])


def test_unknown_override_names_the_closest_key():
    with pytest.raises(ConfigError, match="did you mean 'alpha'"):
        resolve_hparams("etf_debias", "cmnist", overrides={"alpah": 1})


def test_unknown_preset_and_protocol():
    with pytest.raises(UnknownNameError, match="valid names: paper, quick, smoke"):
        resolve_hparams("vanilla", "cmnist", preset="tiny")
    with pytest.raises(UnknownNameError, match="clean"):
        resolve_hparams("vanilla", "cmnist", protocol="cleaned")


def test_run_id_is_a_stable_hash_of_the_resolved_config():
    a = make_config("vanilla", "cmnist", 1, 0, preset="smoke")
    assert a.run_id == make_config("vanilla", "cmnist", 1.0, 0, preset="smoke").run_id
    assert a.run_id.startswith("cmnist_vanilla_r1_s0_")
    assert a.run_id != make_config("vanilla", "cmnist", 1, 1, preset="smoke").run_id
    assert (
        a.run_id
        != make_config("vanilla", "cmnist", 1, 0, preset="smoke", overrides={"lr": 0.01}).run_id
    )
    # the preset's name is not part of the identity, only its effect
    same = make_config(
        "vanilla",
        "cmnist",
        1,
        0,
        preset="paper",
        overrides={"steps": 20, "eval_every": 10, "eval_limit": 500, "eval_batch_size": 256},
    )
    assert same.run_id == a.run_id


def test_per_ratio_and_per_preset_layers(monkeypatch):
    import debias_bench.config.run_config as config

    doc = {
        "defaults": {"lr": 1.0, "eval_every": 100},
        "datasets": {
            "cmnist": {
                "lr": 2.0,
                "ratios": {0.5: {"lr": 3.0}},
                "presets": {"quick": {"eval_every": 7}},
            }
        },
        "presets": {"smoke": {"eval_every": 1}},
    }
    monkeypatch.setattr(config, "method_yaml", lambda method: doc)
    assert config.resolve_hparams("vanilla", "cmnist", ratio=0.5)["lr"] == 3.0
    assert config.resolve_hparams("vanilla", "cmnist", ratio=1.0)["lr"] == 2.0
    assert config.resolve_hparams("vanilla", "cmnist", preset="quick")["eval_every"] == 7
    assert config.resolve_hparams("vanilla", "cmnist", preset="smoke")["eval_every"] == 1
    assert config.resolve_hparams("vanilla", "cmnist", preset="paper")["eval_every"] == 100
    assert "ratios" not in config.resolve_hparams("vanilla", "cmnist")


def test_smoke_preset_needs_no_download_on_bar():
    assert resolve_hparams("vanilla", "bar")["backbone"] == "resnet18_pretrained"
    assert resolve_hparams("vanilla", "bar", preset="smoke")["backbone"] == "resnet20"
    assert "datasets" not in resolve_hparams("vanilla", "cmnist", preset="smoke")


@pytest.mark.parametrize("dataset", ["cifar10c", "bffhq", "dogs_and_cats", "bar"])
@pytest.mark.parametrize("method", ["vanilla", "lff_be"])
def test_smoke_reads_the_image_sets_small_as_ci_does(dataset, method):
    """Issue 39: a 224-px ResNet-18 made a 20-step smoke run take minutes; smoke reads the
    small data of ci at 16 px (seconds a run), its preparation stages as short as its run."""
    smoke = resolve_hparams(method, dataset, preset="smoke")
    ci = resolve_hparams(method, dataset, preset="ci")
    assert (smoke["image_size"], smoke["backbone"]) == (ci["image_size"], ci["backbone"])
    assert (smoke["image_size"], smoke["backbone"]) == (16, "resnet20")
    assert preset_data_options("smoke", dataset) == preset_data_options("ci", dataset)
    assert smoke["steps"] == 20 and smoke.get("committee_steps", 0) <= 20


def _built_in_methods() -> list[str]:
    """The methods that ship with bench (a test may have registered others)."""
    return [e.name for e in METHODS if e.obj.__module__.startswith("debias_bench.methods.")]


def test_smoke_runs_every_method_on_every_dataset():
    """Issue 39.4: smoke checks the plumbing of every method on every dataset. DeNetDM skipped
    the image sets, whose 16 px its image branches cannot take: it reads them at 32 px under
    smoke, with branches of one feature width (its YAML's presets.smoke)."""
    skipped = {}
    for method in _built_in_methods():
        for dataset in BUILTIN_DATASETS:
            hp = resolve_hparams(method, dataset, preset="smoke")
            reason = METHODS.get(method).skip(DATASETS.get(dataset).spec, hp)
            if reason:
                skipped[method, dataset] = reason
    assert skipped == {}
    for dataset in ("cifar10c", "bffhq", "dogs_and_cats", "bar"):
        smoke = resolve_hparams("denetdm", dataset, preset="smoke")
        assert (smoke["image_size"], smoke["steps"], smoke["target_proj"]) == (32, 20, 64)
        ci = resolve_hparams("denetdm", dataset, preset="ci")  # ci keeps its 16 px: skipped
        assert METHODS.get("denetdm").skip(DATASETS.get(dataset).spec, ci) is not None


def test_a_key_named_only_in_a_presets_layer_moves_no_other_runs_id():
    """DeNetDM's YAML names image_size under smoke only: its other runs keep image_size out of
    their identity (it sits at its default there), so their stored ids hold."""
    assert "image_size" not in yaml_keys("denetdm")
    paper = make_config("denetdm", "cmnist", 1.0, 0, preset="paper")
    assert paper.hparams["image_size"] is None and "image_size" not in paper.identity()["hparams"]
    smoke = make_config("denetdm", "cifar10c", 1.0, 0, preset="smoke")
    assert smoke.identity()["hparams"]["image_size"] == 32  # not at its default: in the id


def test_one_request_carries_a_run_through_resolution():
    """Every field of the request reaches its layer; ``make_config`` is its keyword form."""
    settings = {
        "protocol": "clean",
        "preset": "smoke",
        "epochs": 3,
        "overrides": {"lr": 0.5},
        "tuned": {"alpha": 0.6, "lr": 0.1},
        "data_options": {"data_seed": 1},
    }
    request = RunRequest("etf_debias", "cmnist", 1.0, 2, **settings)
    config = request.config()
    assert config == make_config("etf_debias", "cmnist", 1.0, 2, **settings)
    assert config.hparams == resolve_layers(request).values
    assert resolve_hparams("etf_debias", "cmnist", "clean", preset="smoke") != config.hparams
    assert (config.hparams["epochs"], config.sources["epochs"]) == (3, "--epochs")
    assert (config.hparams["alpha"], config.sources["alpha"]) == (0.6, "tuned")
    assert (config.hparams["lr"], config.sources["lr"]) == (0.5, "--set")  # --set over tuned
    assert config.hparams["input_div255"] is False and config.hparams["eval_limit"] == 500
    assert (config.seed, config.preset, config.data_options) == (2, "smoke", {"data_seed": 1})
    with pytest.raises(ConfigError, match="a run needs a ratio"):
        RunRequest("vanilla", "cmnist").config()
    with pytest.raises(ConfigError, match="seed -1 is out of range"):
        RunRequest("vanilla", "cmnist", 1.0, -1).config()
    with pytest.raises(TypeError, match="epoch"):
        make_config("vanilla", "cmnist", 1.0, 0, epoch=3)  # a misspelt setting


def test_a_run_s_typed_params_are_built_once_from_its_values():
    config = make_config("etf_debias", "cmnist", 1.0, 0)
    hp = config.params
    assert type(hp) is ETFDebias.Params and config.params is hp  # built once, then kept
    assert (hp.alpha, hp.lr, hp.backbone) == (0.8, 1e-3, "mlp")
    assert hp.as_dict() == config.hparams
    again = RunConfig.from_json(config.to_json())  # the params are no field: not in config.json
    assert again == config and "params" not in config.to_json() and again.params is not hp
