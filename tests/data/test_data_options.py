"""Declared dataset options: one typed declaration per option, checked for --data-option and
the presets' options; the documented ones work; run ids of the built-in datasets unchanged."""

from __future__ import annotations

import json

import pytest

from debias_bench.cli import main
from debias_bench.config.run_config import PRESETS, preset_data_options
from debias_bench.data.options import (
    DataOption,
    check_data_options,
    data_options_by_dataset,
    declared_options,
)
from debias_bench.datasets.bar import BAR
from debias_bench.datasets.cifar10c import CorruptedCIFAR10
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS

BUILT_IN = ("cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar")


@pytest.mark.parametrize(
    "dataset, options",
    [
        ("cmnist", {"source": "imported"}),
        ("cmnist", {"source": "lff", "severity": 3, "valid_size": 1000}),
        ("cifar10c", {"source": "imported", "corruptions": "type1", "limit": 100}),
        ("bar", {"source": "biasensemble"}),
        ("bar", {"source": "release", "limit_per_class": 60}),
        ("dogs_and_cats", {"source": "biasensemble", "limit_per_group": 150}),
        ("bffhq", {"data_seed": 2}),
    ],
)
def test_the_documented_options_are_accepted(dataset, options):
    assert check_data_options(dataset, options) == options


@pytest.mark.parametrize(
    "dataset, options, words",
    [
        ("cmnist", {"severit": 3}, ["'severit'", "cmnist", "severity", "valid_size", "source"]),
        ("bar", {"severity": 3}, ["'severity'", "bar", "limit_per_class", "source"]),
        ("cmnist", {"severity": 7}, ["severity=7", "cmnist", "1, 2, 3, 4, 5"]),
        ("cmnist", {"severity": "abc"}, ["severity='abc'", "expected int"]),
        ("cmnist", {"severity": 2.5}, ["severity=2.5", "expected int"]),
        ("cmnist", {"severity": True}, ["severity=True", "expected int"]),
        ("cmnist", {"source": "folder"}, ["source='folder'", "build, imported, lff"]),
        ("cifar10c", {"limit": 0}, ["limit=0", ">= 1"]),
        ("cifar10c", {"data_seed": -1}, ["data_seed=-1", "0 <= data_seed <= 4294967295"]),
        ("bar", {"source": "disent"}, ["source='disent'", "auto, release, biasensemble"]),
    ],
)
def test_bad_options_name_the_option_the_dataset_and_the_valid_ones(dataset, options, words):
    with pytest.raises(ConfigError) as err:
        check_data_options(dataset, options)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_values_are_converted_to_their_declared_type():
    assert check_data_options("cmnist", {"severity": "3"}) == {"severity": 3}
    assert check_data_options("cmnist", {"severity": 3.0}) == {"severity": 3}
    assert check_data_options("cifar10c", {"limit": None}) == {"limit": None}
    assert check_data_options("cifar10c", {"limit": "none"}) == {"limit": None}
    assert type(check_data_options("cifar10c", {"limit": 1e2})["limit"]) is int


def test_grid_wide_options_go_to_the_datasets_that_declare_them():
    split = data_options_by_dataset(["cmnist", "bar"], {"severity": 3, "data_seed": 1})
    assert split == {"cmnist": {"severity": 3, "data_seed": 1}, "bar": {"data_seed": 1}}
    with pytest.raises(ConfigError, match=r"unknown data option\(s\) severit"):
        data_options_by_dataset(["cmnist", "bar"], {"severit": 3})


@pytest.mark.parametrize("dataset", BUILT_IN)
def test_run_identity_inputs_come_back_unchanged(dataset):
    """What the run id hashes (``data_options``): exactly what was given, same types, no
    defaults added, for the data seed every grid passes and every preset's options."""
    cases = [{"data_seed": 0}, {"data_seed": 3}]
    cases += [{"data_seed": 0, **preset_data_options(p, dataset)} for p in PRESETS]
    for given in cases:
        checked = check_data_options(dataset, given)
        assert json.dumps(checked, sort_keys=True) == json.dumps(given, sort_keys=True)


def test_families_read_typed_values_and_refuse_unknown_options(tmp_path):
    family = ColoredMNIST(tmp_path, tmp_path, severity="3")
    assert family.severity == 3 and family.valid_size == 6000 and family.source == "build"
    assert family.option_values() == {
        "data_seed": 0,
        "severity": 3,
        "valid_size": 6000,
        "source": "build",
    }
    with pytest.raises(AttributeError, match="read-only"):
        family.severity = 5  # type: ignore[misc]
    with pytest.raises(ConfigError, match="unknown data option 'colour'"):
        ColoredMNIST(tmp_path, tmp_path, colour=1)
    assert (
        CorruptedCIFAR10(tmp_path, tmp_path, corruptions="type1").spec.bias_names[0]
        != (CorruptedCIFAR10.spec.bias_names[0])
    )
    assert BAR(tmp_path, tmp_path, limit_per_class=5).tag_suffix() == "-limit5"


def test_every_registered_dataset_declares_documented_options():
    for entry in DATASETS:
        options = declared_options(entry.obj)
        assert "data_seed" in options
        for name, option in options.items():
            assert isinstance(option, DataOption) and option.name == name
            assert option.doc and option.describe().startswith(name)
            if option.default is not None:
                assert option.parse(option.default, entry.name) == option.default


def test_bench_data_options_lists_them(capsys):
    assert main(["data", "options", "bar"]) == 0
    out = capsys.readouterr().out
    assert "source (str, default 'auto'; one of auto, release, biasensemble)" in out
    assert "limit_per_class (int or none, default none; >= 1)" in out


def test_bench_run_accepts_the_documented_options(tmp_path, capsys):
    base = ["run", "--methods", "vanilla", "--ratios", "1", "--dry-run"]
    base += ["--out", str(tmp_path)]
    for dataset, option in (("cmnist", "source=imported"), ("bar", "source=biasensemble")):
        assert main([*base, "--datasets", dataset, "--data-option", option]) == 0, option
        assert capsys.readouterr().out.startswith("todo")
    assert main([*base, "--datasets", "cmnist", "--data-option", "severity=9"]) == 2
    assert "severity=9 for cmnist" in capsys.readouterr().err


@pytest.mark.parametrize(
    "option, words",
    [
        ("data_seed=1e23", ["data_seed=1e+23 for cmnist", "0 <= data_seed <= 4294967295"]),
        ("data_seed=4294967296", ["data_seed=4294967296", "0 <= data_seed <= 4294967295"]),
        ("valid_size=1e23", ["valid_size=1e+23", "<= 9223372036854775807 (a 64-bit integer)"]),
    ],
)
def test_an_option_outside_its_range_is_refused_up_front_like_data_seed(
    tmp_path, capsys, option, words
):
    """Issue 36, item 2: ``--data-seed 1e23`` is refused when the command line is read; the
    same seed given as a data option was a run that failed with an overflow (exit 1)."""
    out = tmp_path / "runs"
    argv = ["run", "--methods", "vanilla", "--datasets", "cmnist", "--ratios", "1"]
    argv += ["--preset", "smoke", "--device", "cpu", "--out", str(out)]
    assert main([*argv, "--data-option", option]) == 2
    err = capsys.readouterr().err
    first = err.splitlines()[0]
    assert first.startswith("error: data option ") and "Traceback" not in err, err
    for word in words:
        assert word in first, (word, first)
    assert not out.exists()  # refused before anything was recorded
    # the top of the range is a seed like any other (what --data-seed takes)
    assert check_data_options("cmnist", {"data_seed": 2**32 - 1}) == {"data_seed": 2**32 - 1}
    assert main([*argv, "--data-option", "data_seed=4294967295", "--dry-run"]) == 0


def test_the_declared_range_is_documented():
    described = ColoredMNIST.data_seed.describe()
    assert described.startswith("data_seed (int, default 0; 0 <= data_seed <= 4294967295)")
