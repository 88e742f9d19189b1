"""Issue 48: a method is compared on the baselines' terms, or the table says so.

A plugin that declares nothing is trained on the protocol reference's terms (Vanilla's second
division by 255 under ``official``); a column whose terms differ (declared inputs, a sampling
variant, a value off the recipe) carries a mark and the caption names the difference, in every
format; ``bench run`` says it before it starts."""

from __future__ import annotations

import io
import json
import os
import textwrap

import pandas as pd
import pytest
from support.planted import finish, plant

from debias_bench.cli import main
from debias_bench.config.run_config import RunRequest, make_config, resolve_layers
from debias_bench.config.terms import differences, run_terms, sweep_note
from debias_bench.methods.vanilla import Vanilla
from debias_bench.registry import register_method
from debias_bench.runs.store import RunStore

#: Vanilla line for line, as a plugin without a YAML (the issue's ``erm2``)
ERM2 = textwrap.dedent(
    '''
    """Vanilla, line for line, as a plugin without a YAML."""
    import torch.nn.functional as F

    from debias_bench import EngineParams, Method, make_classifier, register_method


    @register_method("erm2", display_name="ERM2", citation="-", needs_bias_labels=False)
    class ERM2(Method):
        Params = EngineParams

        def __init__(self, spec, hp, env):
            super().__init__(spec, hp, env)
            self.model = make_classifier(spec, self.hp, self.device)
            self.optimizer = self.optimizer_for(self.model)
            self.scheduler = self.scheduler_for(self.optimizer)

        def update(self, batch):
            loss = F.cross_entropy(self.model(batch.x), batch.y)
            self.step(loss, (self.optimizer, self.scheduler))
            return {"loss": loss.detach()}

        def predict(self, x):
            return self.model(x)

        def features(self, x):
            return self.model.features(x)
    '''
)


@pytest.fixture
def plugin(registries_restored):
    """A Vanilla subclass registered from this module: no YAML beside it."""
    register_method("plain_plugin", display_name="Plain")(type("Plain", (Vanilla,), {}))
    return "plain_plugin"


def test_a_plugin_without_a_yaml_gets_the_reference_terms(plugin):
    """Before: `input_div255 false engine default` under official, where every baseline of
    the LfF line divides again (the plugin scored 61.75 where its twin Vanilla scored 27.60)."""
    official = resolve_layers(RunRequest(plugin, "cmnist", 5.0, protocol="official"))
    assert official.values["input_div255"] is True
    assert official.sources["input_div255"] == "protocol official (terms of vanilla)"
    vanilla = resolve_layers(RunRequest("vanilla", "cmnist", 5.0, protocol="official"))
    assert vanilla.values["input_div255"] is True  # Vanilla's own, from its YAML
    assert vanilla.sources["input_div255"] == "vanilla.yaml protocols.official"
    clean = resolve_layers(RunRequest(plugin, "cmnist", 5.0, protocol="clean"))
    assert clean.values["input_div255"] is False
    assert clean.sources["input_div255"] == "engine default"


def test_a_declared_value_is_the_methods_own():
    """GroupDRO's official code feeds [0, 1] inputs: its YAML declares it, and its run ids did
    not move (tests/config/test_run_ids.py)."""
    resolved = resolve_layers(RunRequest("groupdro", "cmnist", 5.0, protocol="official"))
    assert resolved.values["input_div255"] is False
    assert resolved.sources["input_div255"] == "groupdro.yaml protocols.official"


def test_the_config_command_names_the_file_and_the_ratio(tmp_path, monkeypatch, in_process):
    """`bench config` named a plugin's YAML by the method (`ls_rw.yaml`), not the file it read
    (`lsrw.yaml`), and did not say which ratio it showed without --ratio."""
    (tmp_path / "lsrw.py").write_text(ERM2.replace('"erm2"', '"ls_rw"'))
    (tmp_path / "lsrw.yaml").write_text("defaults:\n  lr: 0.01\n")
    monkeypatch.setenv("BENCH_PLUGINS", str(tmp_path / "lsrw.py"))
    code, out, _ = in_process("config", "ls_rw", "cmnist")
    assert code == 0
    assert "at 0.5 % (its first ratio; --ratio R for another)" in out.splitlines()[0]
    lr = next(line for line in out.splitlines() if line.startswith("lr "))
    assert lr.split()[-2:] == ["lsrw.yaml", "defaults"]
    code, out, _ = in_process("config", "ls_rw", "cmnist", "--ratio", "5")
    assert "at 5 %, protocol" in out.splitlines()[0]


def test_run_terms_are_read_from_the_recorded_config():
    groupdro = make_config("groupdro", "cmnist", 5.0, 0, overrides={"sampling": "loss_weights"})
    assert run_terms(groupdro.to_json()) == {
        "input_div255": "false",
        "sampling": "loss_weights",
        "off recipe": "sampling=loss_weights",
    }
    assert run_terms(make_config("groupdro", "cmnist", 5.0, 0).to_json()) == {
        "input_div255": "false"  # its own sampling (resample) is no term
    }
    assert run_terms(make_config("vanilla", "cifar10c", 5.0, 0).to_json()) == {}  # no MLP


def test_differences_are_against_the_reference_method_else_the_majority():
    true, false = {"input_div255": "true"}, {"input_div255": "false"}
    terms = {("cmnist", "vanilla"): [true], ("cmnist", "a"): [true], ("cmnist", "b"): [false]}
    (found,) = differences(terms, "official")
    assert (found.method, found.reference, found.terms) == ("b", "vanilla", "input_div255=false")
    terms = {("cmnist", "a"): [false], ("cmnist", "b"): [true], ("cmnist", "c"): [true]}
    (found,) = differences(terms, "official")  # no Vanilla: the terms most columns share
    assert (found.method, found.reference_terms) == ("a", "input_div255=true")
    assert differences({("cmnist", "a"): [true], ("cmnist", "b"): [true]}, "official") == []


def test_the_sweep_says_which_method_differs(plugin):
    configs = [make_config(m, "cmnist", 5.0, 0) for m in ("vanilla", plugin, "lff")]
    assert sweep_note(configs) is None  # the plugin now shares Vanilla's terms
    configs.append(make_config("jtt", "cmnist", 5.0, 0))
    note = sweep_note(configs)
    assert note is not None
    assert "jtt on cmnist: input_div255=false (vanilla: input_div255=true)" in note


def _store_with(tmp_path, *runs: tuple[str, dict]) -> str:
    store = RunStore(tmp_path / "runs")
    for method, make in runs:
        for seed in (0, 1):
            finish(plant(store, method, "cmnist", 5.0, seed, preset="ci", **make))
    return str(store.root)


@pytest.mark.parametrize(
    "runs, marked, named",
    [
        # a declared input scaling other than the reference's
        ([("vanilla", {}), ("lff", {}), ("jtt", {})], "JTT", "input_div255=false"),
        # a sampling variant
        (
            [("vanilla", {}), ("jtt", {"overrides": {"sampling": "loss_weights"}})],
            "JTT [sampling=loss_weights]",
            "sampling=loss_weights",
        ),
        # a value off the recipe on one column only
        ([("vanilla", {}), ("lff", {"overrides": {"lr": 0.01}})], "LfF", "off recipe: lr=0.01"),
    ],
)
def test_a_column_on_other_terms_is_marked_in_every_format(tmp_path, capsys, runs, marked, named):
    """Before: the column was printed (bold when best) with no mark and no word of it."""
    out = _store_with(tmp_path, *runs)
    for fmt in ("markdown", "latex", "html", "csv"):
        assert main(["report", "--out", out, "--table", "synthetic", "--format", fmt]) == 0
        text = capsys.readouterr().out
        if fmt == "csv":
            frame = pd.read_csv(io.StringIO(text))
            differs = frame.loc[frame["terms"].notna(), "column"].unique().tolist()
            assert len(differs) == 1 and named in frame["terms"].dropna().iloc[0]
            continue
        assert (named.replace("_", r"\_") if fmt == "latex" else named) in text, fmt
        assert "trained on other terms than the rest of the table" in text, fmt
        if fmt == "markdown":
            header = next(line for line in text.splitlines() if line.startswith("| dataset"))
            assert f"{marked}" in header and header.count("‡") == 1
        if fmt == "latex":
            assert r"$^{\ddagger}$" in text


def test_columns_on_the_same_terms_carry_no_mark(tmp_path, capsys):
    out = _store_with(tmp_path, ("vanilla", {}), ("lff", {}), ("etf_debias", {}))
    assert main(["report", "--out", out, "--table", "synthetic"]) == 0
    text = capsys.readouterr().out
    assert "‡" not in text and "other terms" not in text


@pytest.mark.realdata
def test_a_plugin_identical_to_vanilla_scores_what_vanilla_scores(tmp_path, raw_root, data_root):
    """The issue's `done when`: `erm2` beside Vanilla under `official` with no YAML (before:
    61.75 against 27.60 on seeds 0-1, the plugin fed inputs 255 times larger)."""
    from support.processes import run_bench

    (tmp_path / "erm2.py").write_text(ERM2)
    env = {
        **os.environ,
        "BENCH_PLUGINS": str(tmp_path / "erm2.py"),
        "BENCH_RAW_ROOT": str(raw_root),
        "BENCH_DATA_ROOT": str(data_root),
    }
    out = str(tmp_path / "runs")
    grid = ["--methods", "vanilla,erm2", "--datasets", "cmnist", "--ratios", "5", "--seeds", "0"]
    ran = run_bench("run", *grid, "--preset", "ci", "--out", out, "--launcher", "inline", env=env)
    assert ran.returncode == 0, ran.stderr
    assert "other terms" not in ran.stderr
    results = {  # read as written: this process has not loaded the plugin
        result["method"]: result
        for result in (json.loads(r.result_path.read_text()) for r in RunStore(out).runs())
    }
    accuracy = {m: r["selections"]["last"]["test"]["accuracy"] for m, r in results.items()}
    assert accuracy["erm2"] == pytest.approx(accuracy["vanilla"], abs=1e-9)
    # each result records the terms it was trained on
    assert results["erm2"]["terms"] == results["vanilla"]["terms"] == {"input_div255": "true"}
