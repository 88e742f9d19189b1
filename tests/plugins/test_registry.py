from __future__ import annotations

import pytest

from debias_bench.cli import main
from debias_bench.errors import UnknownNameError
from debias_bench.registry import DATASETS, METHODS, Registry


def test_register_and_lookup_keeps_metadata():
    reg: Registry[object] = Registry("widget")
    reg.register("a", display_name="A", citation="paper A", needs_bias_labels=True)(object)
    entry = reg.entry("a")
    assert entry.display_name == "A"
    assert entry.citation == "paper A"
    assert entry.meta == {"needs_bias_labels": True}
    assert reg.names() == ["a"]


def test_duplicate_name_is_refused():
    reg: Registry[object] = Registry("widget")
    reg.register("a", display_name="A")(int)
    with pytest.raises(ValueError, match="already registered"):
        reg.register("a", display_name="A again")(str)
    assert reg.get("a") is int


def test_unknown_name_lists_valid_names_and_closest_match():
    with pytest.raises(UnknownNameError) as err:
        METHODS.get("etf_debiass")
    text = str(err.value)
    assert "etf_debias" in text and "vanilla" in text
    assert "did you mean 'etf_debias'" in text


def test_prefix_is_suggested():
    with pytest.raises(UnknownNameError, match="did you mean 'etf_debias'"):
        METHODS.get("etf")


def test_resolve_all_and_lists():
    assert METHODS.resolve("all") == METHODS.names()
    assert METHODS.resolve("vanilla, etf_debias") == ["vanilla", "etf_debias"]
    with pytest.raises(UnknownNameError):
        DATASETS.resolve("cmnist,cifar")


def test_builtin_metadata():
    assert METHODS.entry("etf_debias").meta["needs_bias_labels"] is True
    assert METHODS.entry("vanilla").meta["needs_bias_labels"] is False
    assert METHODS.entry("etf_debias").display_name == "ETF-Debias"
    assert DATASETS.entry("cmnist").display_name == "Colored MNIST"


def test_cli_list_shows_metadata(capsys):
    assert main(["list", "methods"]) == 0
    out = capsys.readouterr().out
    assert "ETF-Debias" in out and "bias labels" in out and "CVPR 2024" in out
    assert main(["list", "datasets"]) == 0
    assert "Colored MNIST" in capsys.readouterr().out


def test_cli_unknown_method_is_a_clear_error(capsys):
    assert main(["run", "--methods", "vanila", "--dry-run"]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'vanila'" in err and "did you mean 'vanilla'" in err
