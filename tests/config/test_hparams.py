"""Declared hyperparameters, dataset recipes, `bench config`, and run ids that stay stable."""

from __future__ import annotations

import dataclasses

import pytest

from debias_bench.cli import main
from debias_bench.config.grid import Grid, expand
from debias_bench.config.hparams import (
    ENGINE_HPARAMS,
    REQUIRED,
    EngineParams,
    HParam,
    declarations,
    hparam,
    own_declarations,
    timing_values,
)
from debias_bench.config.run_config import RunRequest, make_config, resolve_layers
from debias_bench.errors import ConfigError
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import DATASETS, METHODS

#: the built-in methods (a plugin method another test module registered in this worker has no
#: YAML, hence no Colored MNIST entry to follow)
ALL_METHODS = [
    name
    for name in METHODS.names()
    if METHODS.get(name).__module__.startswith(Vanilla.__module__.rpartition(".")[0])
]


@pytest.mark.parametrize(
    ("param", "value", "parsed"),
    [
        (HParam("lr", "float", 1e-3, "", low=0, low_open=True), "2e-3", 2e-3),
        (HParam("lr", "float", 1e-3, "", low=0, low_open=True), 1, 1),  # an int stays an int
        (HParam("n", "int", 1, "", low=1), 4.0, 4),
        (HParam("flag", "bool", False, ""), "true", True),
        (HParam("mode", "str", "a", "", choices=("a", "b")), "b", "b"),
        (HParam("mode", "str", "auto", "", choices=("auto", "true", "false")), False, "false"),
        (HParam("steps", "int", None, "", low=1, nullable=True), None, None),
        (HParam("hidden", "ints", None, "", low=1, nullable=True), [100, 16], [100, 16]),
    ],
)
def test_values_are_parsed_to_their_declared_kind(param, value, parsed):
    result = param.parse(value, "test")
    assert result == parsed and type(result) is type(parsed)


@pytest.mark.parametrize(
    ("param", "value"),
    [
        (HParam("lr", "float", 1e-3, "", low=0, low_open=True), 0),
        (HParam("lr", "float", 1e-3, "", low=0, low_open=True), "abc"),
        (HParam("lr", "float", 1e-3, "", low=0, low_open=True), float("nan")),
        (HParam("n", "int", 1, "", low=1), 2.5),
        (HParam("n", "int", 1, "", low=1), True),  # a bool is not a number here
        (HParam("n", "int", 1, "", low=1), -4),
        (HParam("mode", "str", "a", "", choices=("a", "b")), "c"),
        (HParam("steps", "int", 1, "", low=1), None),  # not nullable
        (HParam("hidden", "ints", None, "", low=1, nullable=True), [100, 0]),
    ],
)
def test_bad_values_are_named(param, value):
    with pytest.raises(ConfigError, match=f"test: {param.name}="):
        param.parse(value, "test")


def test_every_builtin_method_declares_every_key_its_yaml_sets():
    """resolve_layers refuses undeclared keys, so resolving every layer of every built-in
    (all datasets, protocols and presets) proves the declarations cover the YAML."""
    for method in ALL_METHODS:
        for dataset in ("cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar"):
            for protocol in ("official", "clean"):
                for preset in ("paper", "quick", "smoke", "ci"):
                    for ratio in DATASETS.get(dataset).spec.ratios:
                        request = RunRequest(method, dataset, ratio, protocol=protocol,
                                             preset=preset)  # fmt: skip
                        resolve_layers(request)


def test_unknown_and_misspelled_keys_are_refused_before_any_run():
    with pytest.raises(ConfigError, match="no hyperparameter 'alpah'") as info:
        make_config("etf_debias", "cmnist", 1, 0, overrides={"alpah": 0.5})
    assert "did you mean 'alpha'" in str(info.value)
    with pytest.raises(ConfigError, match="no hyperparameter 'alpha'"):
        make_config("vanilla", "cmnist", 1, 0, overrides={"alpha": 0.5})  # not vanilla's key


def test_engine_keys_work_for_every_method_without_yaml_entries():
    """The engine declares the optimiser keys, so `--set lr=...` works for any method."""
    for method in ALL_METHODS:
        config = make_config(method, "toy", 20, 0, overrides={"lr": 2e-3, "momentum": 0.5})
        assert config.hparams["lr"] == 2e-3 and config.sources["lr"] == "--set"


def test_run_ids_published_before_the_declarations_are_unchanged():
    """These ids were written by the harness before hyperparameters were declared (the
    committed reproduction and users' stores depend on them)."""
    pinned = {
        ("vanilla", 1.0, 0): "cmnist_vanilla_r1_s0_b87a585fc9",
        ("etf_debias", 1.0, 0): "cmnist_etf_debias_r1_s0_0f4ac76d05",
        ("lff", 1.0, 0): "cmnist_lff_r1_s0_7c3dd26905",
        ("disent", 1.0, 2): "cmnist_disent_r1_s2_7a77407581",
    }
    for (method, ratio, seed), run_id in pinned.items():
        config = make_config(method, "cmnist", ratio, seed, data_options={"data_seed": 0})
        assert config.run_id == run_id


def test_a_late_engine_key_at_its_default_leaves_the_id_alone():
    base = make_config("vanilla", "toy", 20, 0)
    assert make_config("vanilla", "toy", 20, 0, overrides={"momentum": 0.9}).run_id == base.run_id
    assert make_config("vanilla", "toy", 20, 0, overrides={"momentum": 0.5}).run_id != base.run_id
    late = [p.name for p in ENGINE_HPARAMS if p.late]
    assert {"optimizer", "lr", "weight_decay", "image_size"} <= set(late)


@pytest.fixture
def digits_like():
    """A dataset registered with recipe="cmnist" (a colour-biased digit set of one's own)."""
    family = DATASETS.get("cmnist")
    DATASETS.register("my_digits", display_name="My digits", recipe="cmnist")(family)
    DATASETS.register("no_recipe", display_name="No recipe")(family)
    yield "my_digits"
    DATASETS.unregister("my_digits")
    DATASETS.unregister("no_recipe")


def test_a_recipe_dataset_gets_every_method_s_settings_of_its_recipe(digits_like):
    for method in ALL_METHODS:
        for ratio in (0.5, 1.0, 5.0):
            ours = resolve_layers(RunRequest(method, digits_like, ratio))
            theirs = resolve_layers(RunRequest(method, "cmnist", ratio))
            assert ours.values == theirs.values, method
            assert ours.recipe == "cmnist"
    config = make_config("disent", digits_like, 1, 0)
    assert config.recipe == "cmnist"
    assert config.sources["lr"] == "disent.yaml datasets.cmnist (recipe of my_digits)"


def test_a_dataset_without_settings_runs_on_bare_defaults_with_a_note(digits_like):
    configs, notes = expand(Grid(["disent", "vanilla"], ["no_recipe"], [1.0], [0]))
    assert len(configs) == 2
    (note,) = [n for n in notes if n.startswith("disent")]
    assert "no settings for no_recipe" in note and "curr_step" in note and "lr" in note
    assert configs[0].hparams["curr_step"] == 0  # the YAML default, not cmnist's 10000


def test_duplicate_grid_entries_collapse():
    configs, _ = expand(Grid(["vanilla"], ["toy"], [20.0, 20.0], [0, 0, 1]))
    assert [c.seed for c in configs] == [0, 1]


def test_tuned_values_sit_between_the_preset_and_set():
    tuned = {("vanilla", "toy", 20.0): {"lr": 5e-3, "batch_size": 32}}
    configs, _ = expand(
        Grid(["vanilla"], ["toy"], [20.0], [0], overrides={"lr": 1e-2}, tuned=tuned)
    )
    (config,) = configs
    assert config.hparams["batch_size"] == 32 and config.sources["batch_size"] == "tuned"
    assert config.hparams["lr"] == 1e-2 and config.sources["lr"] == "--set"


def test_bench_config_prints_every_value_with_its_layer(capsys):
    assert main(["config", "lff", "cmnist", "--ratio", "5", "--set", "lr=2e-3"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("# lff on cmnist at 5 %, protocol official, preset paper")
    table = {line.split()[0]: line for line in lines[1:] if not line.startswith("#")}
    assert table["lr"].split()[1:] == ["0.002", "--set"]
    assert table["input_div255"].split()[1:] == ["true", "lff.yaml", "protocols.official"]
    assert table["q"].split()[1:] == ["0.7", "lff.yaml", "defaults"]
    assert table["epochs"].split()[1:] == ["100", "lff.yaml", "datasets.cmnist"]
    assert set(table) == set(resolve_layers(RunRequest("lff", "cmnist", 5)).values)
    # the declared search spaces; lr's is around the recipe's 1e-3, whatever --set gives
    assert lines[-1] == (
        "# bench tune searches: ema_alpha uniform 0.5..0.9, lr log_uniform 0.0001..0.01, "
        "q uniform 0.5..0.9, weight_decay log_uniform 1e-06..0.001"
    )


# --------------------------------------------------------------------------- typed params


@dataclasses.dataclass(frozen=True)
class _Params(EngineParams):
    depth: int = hparam(REQUIRED, "a depth", low=1, timing=1)
    scale: float | None = hparam(0.5, "a scale", low=0)
    widths: tuple[int, ...] | None = hparam(None, "widths", low=1)


def test_a_field_declares_name_kind_and_nullability_from_its_annotation():
    own = {p.name: p for p in declarations(_Params)}
    assert (own["depth"].kind, own["depth"].nullable, own["depth"].low) == ("int", False, 1)
    assert (own["scale"].kind, own["scale"].nullable, own["scale"].default) == ("float", True, 0.5)
    assert (own["widths"].kind, own["widths"].nullable) == ("ints", True)
    assert declarations(_Params)[: len(ENGINE_HPARAMS)] == ENGINE_HPARAMS
    assert timing_values(declarations(_Params)) == {"depth": 1}


def test_typed_params_from_resolved_values():
    hp = _Params.of({"backbone": "mlp", "depth": 3, "widths": [4, 2], "another_method_s": 1})
    assert (hp.depth, hp.scale, hp.widths, hp.lr, hp.steps) == (3, 0.5, (4, 2), 1e-3, None)
    assert _Params.of(hp) is hp  # params of the class are not built again
    assert EngineParams.of(hp) is hp  # nor read as a base class's
    engine = EngineParams.of({"backbone": "mlp"})
    assert _Params.of({**engine.as_dict(), "depth": 2}).depth == 2
    with pytest.raises(ConfigError, match="no value for hyperparameter 'depth'"):
        _Params.of(engine)  # a base class's params lack the class's own keys
    with pytest.raises(ConfigError, match="no value for hyperparameter 'depth'"):
        _Params.of({"backbone": "mlp"})


def test_params_are_read_as_attributes_not_as_a_mapping():
    hp = _Params.of({"backbone": "mlp", "depth": 3})
    with pytest.raises(TypeError):
        hp["depth"]
    assert not hasattr(hp, "get") and not hasattr(hp, "keys")
    values = hp.as_dict()
    assert list(values)[: len(ENGINE_HPARAMS)] == [p.name for p in ENGINE_HPARAMS]
    assert (values["depth"], values["scale"], len(values)) == (3, 0.5, len(ENGINE_HPARAMS) + 3)


def test_a_key_may_not_take_the_name_of_a_params_method():
    @dataclasses.dataclass(frozen=True)
    class Shadowing(EngineParams):
        as_dict: int = hparam(1, "a key named like the method")

    with pytest.raises(TypeError, match=r"Shadowing\.as_dict: the name is taken"):
        declarations(Shadowing)


def test_a_params_field_must_be_declared_with_a_supported_type():
    @dataclasses.dataclass(frozen=True)
    class Plain(EngineParams):
        depth: int = 3

    @dataclasses.dataclass(frozen=True)
    class Odd(EngineParams):
        depth: complex = hparam(1j, "a complex number")

    with pytest.raises(TypeError, match="not declared with"):
        declarations(Plain)
    with pytest.raises(TypeError, match="int, float, bool, str or tuple"):
        declarations(Odd)


def test_a_method_in_the_former_form_is_refused_with_the_fix():
    """``HPARAMS`` records were the former declaration form; its keys would now go unread."""
    with pytest.raises(TypeError, match=r"Former.HPARAMS: declare .* as a Params dataclass"):

        class Former(Vanilla):
            HPARAMS = (HParam("depth", "int", 2, "a depth", low=1),)

    with pytest.raises(TypeError, match="not declared with hparam"):

        class Undeclared(Vanilla):
            @dataclasses.dataclass(frozen=True)
            class Params(EngineParams):
                depth: int = 3


def test_a_method_s_own_keys_are_those_beyond_the_engine_s():
    own = [p.name for p in own_declarations(METHODS.get("lff_be").Params)]
    assert own[0] == "q" and "ema_alpha" in own  # inherited from LfF: its own too
    assert not set(own) & {p.name for p in ENGINE_HPARAMS}
    assert own_declarations(EngineParams) == ()
