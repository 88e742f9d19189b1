"""What a dataset knows lives on its family class: its presets' values, its training-set sizes
and its validation split: presets' values also from the dataset named by ``recipe=`` (and
overridable), the facts about its data from its own class only.
The plugins are real files written to a temporary folder and imported by path."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

import pytest

from debias_bench.analysis.tuning import valid_split_note
from debias_bench.cli import main
from debias_bench.config.grid import Grid, expand
from debias_bench.config.run_config import make_config, preset_data_options
from debias_bench.data.facts import (
    class_preset,
    off_recipe_data_options,
    train_size,
    valid_split,
)
from debias_bench.data.family import PresetValues
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import ConfigError
from debias_bench.perf.projection import run_steps
from debias_bench.plugins import loading as plugins
from debias_bench.registry import DATASETS

#: The README's Colored Fashion-MNIST, reduced to what matters here: a subclass of
#: ColourBiasedDigits (not of ColoredMNIST) that follows Colored MNIST's recipe.
DIGITS = """
import dataclasses

from debias_bench.datasets.cmnist import ColoredMNIST, ColourBiasedDigits
from debias_bench.data.family import PresetValues
from debias_bench.registry import register_dataset


@register_dataset("{name}", display_name="Colour-biased digits", kind="synthetic", recipe="cmnist")
class Digits(ColourBiasedDigits):
    spec = dataclasses.replace(ColoredMNIST.spec, name="{name}")
{body}
"""

#: A family of its own (no base class in common with the recipe's but DatasetFamily).
OWN_FAMILY = """
from debias_bench.data.spec import DatasetSpec
from debias_bench.data.family import DatasetFamily
from debias_bench.registry import register_dataset


@register_dataset("{name}", display_name="Own family", kind="synthetic", recipe="{recipe}")
class Own(DatasetFamily):
    spec = DatasetSpec(
        name="{name}", num_classes=10, num_biases=10, ratios=(0.5, 1.0, 2.0, 5.0),
        image_size=(28, 28), channels=3, backbone="mlp", test_kind="unbiased",
    )

    def prepare(self, ratios=None, force=False):
        return self.data_root
"""


@pytest.fixture
def plugin(tmp_path):
    """``plugin(name, source)``: write ``<tmp>/<name>.py``, import it by path, return its path;
    every dataset it registered is unregistered afterwards."""
    registered: list[tuple[str, str]] = []

    def write(name: str, source: str) -> Path:
        path = tmp_path / f"{name}.py"
        path.write_text(textwrap.dedent(source))
        module = plugins.import_plugin(str(path))
        registered.append((name, module))
        return path

    yield write
    for name, module in registered:
        DATASETS.unregister(name)
        sys.modules.pop(module, None)
        plugins._FROM_PATH.pop(module, None)


def _digits(name: str, body: str = "") -> str:
    return DIGITS.replace("{name}", name).replace("{body}", textwrap.indent(body, "    "))


def test_bench_config_gives_a_recipe_dataset_its_recipes_ci_values(tmp_path):
    """The bug of issue 24: ``recipe="cmnist"`` got 60 steps on its whole training set."""
    path = tmp_path / "cdigits.py"
    path.write_text(_digits("cdigits"))
    env = {**os.environ, "BENCH_PLUGINS": str(path), "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "debias_bench.cli", "config", "vanilla", "cdigits"]
    done = subprocess.run([*command, "--preset", "ci"], capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr
    rows = {line.split()[0]: line.split(None, 2)[1:] for line in done.stdout.splitlines()[1:]}
    inherited = "preset ci (dataset cmnist, recipe of cdigits)"
    assert rows["train_limit"] == ["6000", inherited]
    assert rows["steps"] == ["240", inherited]
    assert rows["eval_every"] == ["20", inherited]
    assert rows["eval_limit"] == ["null", inherited]  # over the engine-wide 1000
    assert rows["valid_limit"] == ["1000", inherited]


def test_a_recipe_dataset_resolves_exactly_as_its_recipe_under_ci(plugin):
    plugin("cdigits2", _digits("cdigits2"))
    for method in ("vanilla", "lff", "etf_debias"):
        ours = make_config(method, "cdigits2", 1.0, 0, preset="ci")
        theirs = make_config(method, "cmnist", 1.0, 0, preset="ci")
        assert ours.hparams == theirs.hparams
        assert ours.run_id != theirs.run_id  # another dataset: another run


def test_a_dataset_overrides_one_value_of_its_recipes_preset(plugin):
    plugin(
        "cdigits_short", _digits("cdigits_short", 'presets = {"ci": PresetValues({"steps": 120})}')
    )
    config = make_config("vanilla", "cdigits_short", 1.0, 0, preset="ci")
    assert config.hparams["steps"] == 120
    assert config.sources["steps"] == "preset ci (dataset cdigits_short)"
    assert config.hparams["train_limit"] == 6000  # the rest still from Colored MNIST
    assert config.sources["train_limit"] == "preset ci (dataset cmnist, recipe of cdigits_short)"
    # and Colored MNIST itself is untouched
    assert make_config("vanilla", "cmnist", 1.0, 0, preset="ci").hparams["steps"] == 240


def test_a_subclass_overrides_one_value_of_its_base_class_preset():
    class Shorter(ColoredMNIST):
        presets: ClassVar[Mapping[str, PresetValues]] = {
            "ci": PresetValues({"steps": 120}),
            "smoke": PresetValues({"steps": 5}),
        }

    ci = class_preset(Shorter, "ci")
    assert ci.hparams == {
        "train_limit": 6000,
        "batch_size": 256,
        "steps": 120,
        "eval_every": 20,
        "eval_limit": None,
        "valid_limit": 1000,
    }
    assert class_preset(Shorter, "smoke").hparams == {"steps": 5}
    assert class_preset(ColoredMNIST, "ci").hparams["steps"] == 240


def test_sizes_and_valid_split_are_never_taken_from_the_recipe(plugin):
    """Issue 39.12: a recipe lends method settings, not facts about another set's data (a
    10,100-image set with recipe=... claimed the recipe's training-set size)."""
    plugin("own_digits", OWN_FAMILY.replace("{name}", "own_digits").replace("{recipe}", "cmnist"))
    assert train_size("cmnist", 1.0) == 54_000
    assert train_size("own_digits", 1.0) is None
    assert run_steps("vanilla", "own_digits", 1.0) is None  # left out of a projection
    assert valid_split("own_digits") is None
    assert valid_split_note("own_digits") == "the dataset's own valid split"
    # the recipe's presets still apply: a run_share key needs the unknown size, and says so
    with pytest.raises(ConfigError, match="declares no training-set size") as refused:
        make_config("disent", "own_digits", 1.0, 0, preset="quick")
    assert "declare train_sizes on own_digits's family" in refused.value.hint
    # a subclass of the digits family declares its own (its base class's) split
    plugin("cdigits3", _digits("cdigits3", "train_sizes = {1.0: 100}"))
    assert "option valid_size" in valid_split_note("cdigits3")
    assert train_size("cdigits3", 1.0) == 100 and train_size("cdigits3", 5.0) is None
    assert run_steps("vanilla", "cdigits3", 5.0) is None  # size unknown: left out of a projection


def test_a_dataset_with_nothing_declared_gets_the_engine_defaults(plugin):
    plugin("bare_ds", OWN_FAMILY.replace("{name}", "bare_ds").replace(', recipe="{recipe}"', ""))
    assert train_size("bare_ds", 1.0) is None
    assert valid_split_note("bare_ds") == "the dataset's own valid split"
    config = make_config("vanilla", "bare_ds", 1.0, 0, preset="ci")
    assert config.hparams["steps"] == 60 and config.sources["steps"] == "preset ci"
    assert config.sources["train_limit"] == "engine default"


def test_a_presets_build_options_are_the_familys_own_not_the_recipes(plugin):
    """cifar10c's ci build options (limit, valid_size) are options of its family: a dataset
    that follows its recipe but has another family does not receive them."""
    plugin("own_c10", OWN_FAMILY.replace("{name}", "own_c10").replace("{recipe}", "cifar10c"))
    assert preset_data_options("ci", "cifar10c") == {"limit": 100, "valid_size": 200}
    assert preset_data_options("ci", "own_c10") == {}
    hp = make_config("vanilla", "own_c10", 1.0, 0, preset="ci").hparams
    assert (hp["backbone"], hp["image_size"], hp["batch_size"]) == ("resnet20", 16, 32)


def test_export_and_import_name_the_datasets_that_support_them(plugin, tmp_path, capsys):
    plugin("own_lff", OWN_FAMILY.replace("{name}", "own_lff").replace("{recipe}", "cmnist"))
    plugin("cdigits4", _digits("cdigits4"))
    out = str(tmp_path / "out")
    assert main(["data", "export", "bar", "--ratio", "1", "--out", out]) == 2
    err = capsys.readouterr().err
    assert "bar cannot be written in the LfF npy layout" in err
    assert "datasets that can: cmnist, cifar10c" in err  # not the digits plugin: LfF lacks it
    assert main(["data", "import", "own_lff", out, "--ratio", "1"]) == 2
    err = capsys.readouterr().err
    assert "own_lff cannot read imported LfF or DisEnt data" in err
    assert "cmnist, cifar10c" in err and "cdigits4" in err  # importable, like any digits family


def test_bench_list_presets_shows_what_each_dataset_adds(plugin, capsys):
    plugin(
        "cdigits_listed",
        _digits("cdigits_listed", 'presets = {"ci": PresetValues({"steps": 120})}'),
    )
    assert main(["list", "presets"]) == 0
    lines = capsys.readouterr().out.splitlines()
    ci = lines[next(i for i, line in enumerate(lines) if line.startswith("ci "))]
    assert "'num_threads': 1" in ci  # the engine-wide values
    below = {line.split()[0]: line for line in lines if line.startswith("  ")}
    assert "'train_limit': 6000" in below["cmnist"]
    assert "data options {'limit': 100, 'valid_size': 200}" in below["cifar10c"]
    # a recipe dataset: its recipe's values, its own override winning
    assert "'train_limit': 6000" in below["cdigits_listed"]
    assert "'steps': 120" in below["cdigits_listed"]


def test_off_recipe_data_options_compare_with_the_preset_then_the_defaults() -> None:
    """What makes a run's data other than its recipe's: a value off the preset's build options
    (cifar10c's ``ci`` preset sets limit 100 and valid_size 200), else off the option's default;
    an option that only changes how the data is built (``n_jobs``) never counts."""
    recipe = {"data_seed": 0, "limit": 100, "valid_size": 200}
    assert off_recipe_data_options("ci", "cifar10c", recipe) == {}
    assert off_recipe_data_options("ci", "cifar10c", {**recipe, "n_jobs": 8}) == {}
    changed = {**recipe, "severity": 2, "limit": 50, "data_seed": 1}
    assert off_recipe_data_options("ci", "cifar10c", changed) == {
        "severity": 2,
        "limit": 50,
        "data_seed": 1,
    }
    # under the paper preset, the ci preset's limit is itself off the recipe
    assert off_recipe_data_options("paper", "cifar10c", recipe) == {"limit": 100, "valid_size": 200}
    assert off_recipe_data_options("paper", "cmnist", {"data_seed": 0, "severity": 4}) == {}


def test_a_preset_that_reads_the_images_at_another_size_says_so(plugin, capsys):
    """Issue 39.11: the ci preset read a 64x32 set at 16x16 without a word, and `bench list
    datasets` called it 64px."""
    wide = OWN_FAMILY.replace("(28, 28)", "(64, 32)").replace('"mlp"', '"resnet20"')
    plugin("wide_ds", wide.replace("{name}", "wide_ds").replace("{recipe}", "cifar10c"))
    assert main(["list", "datasets"]) == 0
    rows = capsys.readouterr().out.splitlines()
    assert "| 64x32 " in next(row for row in rows if row.startswith("| wide_ds "))
    assert "| 28x28 " in next(row for row in rows if row.startswith("| cmnist "))
    said = "wide_ds: images read at 16x16, not the dataset's own 64x32 (height x width)"
    _, notes = expand(Grid(["vanilla", "lff"], ["wide_ds"], [1.0], [0, 1], preset="ci"))
    assert [note for note in notes if said in note] == [
        f"{said}: image_size=16 from preset ci (dataset cifar10c, recipe of wide_ds); "
        "`--set image_size=null` keeps the dataset's size"
    ]
    assert main(["config", "vanilla", "wide_ds", "--preset", "ci"]) == 0
    assert f"# {said}" in capsys.readouterr().out
    _, notes = expand(Grid(["vanilla"], ["wide_ds"], [1.0], [0], preset="paper"))
    assert not [note for note in notes if "images read at" in note]


#: Issue 39.12: a set of its own that reuses Corrupted CIFAR-10's builder by subclassing it
C10_SUBCLASS = """
import dataclasses

from debias_bench.datasets.cifar10c import CorruptedCIFAR10
from debias_bench.registry import register_dataset


@register_dataset("{name}", display_name="Few corruptions", kind="synthetic")
class Few(CorruptedCIFAR10):
    spec = dataclasses.replace(CorruptedCIFAR10.spec, name="{name}", ratios=(1.0,))
{body}
"""


def _c10(name: str, body: str = "") -> str:
    return C10_SUBCLASS.replace("{name}", name).replace("{body}", textwrap.indent(body, "    "))


def test_a_subclass_of_a_registered_dataset_must_declare_its_own_data_facts(plugin):
    with pytest.raises(ConfigError) as refused:
        plugin("few_c10", _c10("few_c10"))
    message = str(refused.value)
    assert (
        "dataset 'few_c10' (Few) inherits train_sizes (and valid_split) from the registered "
        "dataset 'cifar10c' (CorruptedCIFAR10): a fact about that dataset's data" in message
    )
    assert "hint: declare it on Few: train_sizes = {ratio: training images, ...}" in message
    assert "valid_split = " in message
    assert "few_c10" not in DATASETS
    # declared, it registers, and its own sizes are the ones used
    plugin(
        "few_c10b",
        _c10("few_c10b", 'train_sizes = {1.0: 10_100}\nvalid_split = "1,000 held out"'),
    )
    assert train_size("few_c10b", 1.0) == 10_100
    assert valid_split("few_c10b") == "1,000 held out"
    assert train_size("cifar10c", 1.0) == 45_000


def test_a_subclass_of_a_registered_dataset_must_declare_its_spec(plugin):
    source = _c10("few_c10c", 'train_sizes = {}\nvalid_split = ""').replace(
        '    spec = dataclasses.replace(CorruptedCIFAR10.spec, name="few_c10c", ratios=(1.0,))\n',
        "",
    )
    with pytest.raises(ConfigError, match=r"inherits spec from the registered dataset 'cifar"):
        plugin("few_c10c", source)


def test_bench_data_fixture_names_how_a_plugin_adds_a_generator(plugin, tmp_path, capsys):
    """Issue 39.14: a plugin dataset without a fixture generator was one bare line."""
    no_recipe = OWN_FAMILY.replace(', recipe="{recipe}"', "")
    plugin("no_fixture_ds", no_recipe.replace("{name}", "no_fixture_ds"))
    argv = ["data", "fixture", "no_fixture_ds", "--data-root", str(tmp_path / "data")]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: no_fixture_ds has no fixture generator\n")
    assert "hint: define write_fixture(self, per_class=None) on Own (" in err
    assert "docs/extending/dataset.md" in err and "Traceback" not in err
    with_one = (
        no_recipe
        + """
    def write_fixture(self, per_class=None):
        (self.raw_root / "tiny.txt").parent.mkdir(parents=True, exist_ok=True)
        (self.raw_root / "tiny.txt").write_text(str(per_class or 2))
        return {"data_seed": 0}
"""
    )
    plugin("fixture_ds", with_one.replace("{name}", "fixture_ds"))
    out = tmp_path / "raw"
    assert main(["data", "fixture", "fixture_ds", "--out", str(out), "--per-class", "3"]) == 0
    assert (out / "tiny.txt").read_text() == "3"
