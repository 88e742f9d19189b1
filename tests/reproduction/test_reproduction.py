"""`bench reproduce`: export of done runs to the reproduction CSV, the flagging rule, the table.

The run store is written with the real ``RunStore`` (config, status, result as the engine
leaves them), so the export reads exactly what a sweep leaves behind.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from debias_bench.cli import main
from debias_bench.config.run_config import make_config
from debias_bench.errors import ConfigError
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reproduction.compare import (
    UNEXPLAINED,
    compare_frame,
    explanation,
    is_flagged,
    variants,
)
from debias_bench.reproduction.export import (
    COLUMNS,
    export_frame,
    merge_frames,
    read_csv,
    tail_accuracy,
    write_csv,
)
from debias_bench.reproduction.render import (
    render_readme,
    render_table,
    render_variants,
    tail_note,
)
from debias_bench.runs.provenance import config_json, git_commit
from debias_bench.runs.run_dir import RunDir
from debias_bench.runs.states import RunState
from debias_bench.runs.store import RunStore

REPO = Path(__file__).resolve().parents[2]

SELECTIONS = ("last", "best_valid", "best_test")


def metrics(acc: float) -> dict[str, Any]:
    return {"accuracy": acc, "aligned_accuracy": acc + 10.0, "conflicting_accuracy": acc - 5.0}


def rid(method: str, ratio: float, seed: int, dataset: str = "cmnist") -> str:
    """The run id ``write_run`` gives that run (official protocol, paper preset)."""
    return make_config(method, dataset, ratio, seed).run_id


def write_run(
    root: Path,
    method: str,
    ratio: float,
    seed: int,
    acc: float | None,
    state: str = "done",
    dataset: str = "cmnist",
    commit: str | None = None,
    overrides: dict[str, Any] | None = None,
    data_options: dict[str, Any] | None = None,
    last_step: int = 10,
) -> RunDir:
    """A run as the engine leaves it; ``acc`` is the test accuracy of ``last`` (best_valid +1,
    best_test +2; ``last`` at ``last_step``, the others at step 10). Its config records the
    code that planned it as version 0.1.0 at ``commit``; ``overrides`` are its ``--set``
    values, ``data_options`` its build options."""
    config = make_config(
        method, dataset, ratio, seed, overrides=overrides, data_options=data_options
    )
    run = RunStore(root).run(config.run_id)
    provenance = {"code_version": "0.1.0", "git_commit": commit}
    run.plan({**config_json(config), "provenance": provenance})
    if state != "done":
        if state != "pending":
            run.transition(RunState(state))
        return run
    assert acc is not None
    selections = {
        sel: {
            "step": last_step if sel == "last" else 10,
            "epoch": 1.0,
            "valid": metrics(acc + 50),
            "test": metrics(acc + k),
        }
        for k, sel in enumerate(SELECTIONS)
    }
    run.transition(RunState.RUNNING, attempt=1)
    run.write_result(
        {
            "method": method,
            "dataset": dataset,
            "ratio": ratio,
            "seed": seed,
            "protocol": config.protocol,
            "preset": config.preset,
            "hparams": config.hparams,
            "selections": selections,
            "train_time_s": 12.5,
            "prepare_time_s": 0.0,
            "peak_memory_mb": 1.0,
            "device": "cpu",
            "epochs": 100.0,
            "code_version": "0.1.0",
        }
    )
    run.transition(RunState.DONE, exit_code=0)
    return run


@pytest.fixture()
def store(tmp_path: Path) -> Path:
    root = tmp_path / "runs"
    for seed, (van, etf) in enumerate([(54.0, 80.0), (55.0, 82.0), (56.0, 84.0)]):
        write_run(root, "vanilla", 1.0, seed, van)
        write_run(root, "etf_debias", 1.0, seed, etf, commit="0123abcdef" * 4 if seed else None)
    write_run(root, "lff", 1.0, 0, 71.0)
    write_run(root, "lff", 1.0, 1, None, state="running")
    write_run(root, "vanilla", 5.0, 0, 10.0, dataset="toy")  # another dataset
    return root


PAPER = PaperNumbers(
    name="test",
    source="test paper",
    protocol="official",
    statistic="",
    accuracy={
        ("cmnist", 1.0, "vanilla"): (48.45, 0.06),
        ("cmnist", 1.0, "etf_debias"): (81.97, 0.26),
        ("cmnist", 1.0, "lff"): (72.29, 1.69),
        ("cmnist", 1.0, "disent"): (79.49, 1.44),
    },
)


def test_export_rows_and_columns(store: Path, tmp_path: Path) -> None:
    frame, unfinished = export_frame(RunStore(store), "cmnist")
    assert list(frame.columns) == COLUMNS
    # 7 done cmnist runs x 3 selections; the running one and the toy run are left out
    assert len(frame) == 21
    assert set(frame["dataset"]) == {"cmnist"}
    assert unfinished == [f"{rid('lff', 1.0, 1)} (running)"]
    row = frame[(frame["method"] == "etf_debias") & (frame["seed"] == 1)]
    assert dict(zip(row["selection"], row["accuracy"], strict=True)) == {
        "last": 82.0,
        "best_valid": 83.0,
        "best_test": 84.0,
    }  # the test split, not valid (+50)
    assert set(row["epochs"]) == {100.0}
    # the commit its config's provenance names; the version alone where none was known
    assert set(row["code_version"]) == {"0.1.0+g0123abcdef"}
    seed0 = frame[(frame["method"] == "etf_debias") & (frame["seed"] == 0)]
    assert set(seed0["code_version"]) == {"0.1.0"}
    assert set(row["aligned_accuracy"] - row["accuracy"]) == {10.0}
    path = tmp_path / "out" / "cmnist.csv"
    write_csv(frame, path)
    back = read_csv(path)
    assert list(back.columns) == COLUMNS and len(back) == 21
    pd.testing.assert_series_equal(back["accuracy"], frame["accuracy"].astype(float))


def test_runs_off_the_recipe_are_variants_never_averaged_with_the_recipe(store: Path) -> None:
    """Runs with ``--set`` values (evidence runs) export with their overrides; the comparison
    with the paper takes the recipe's runs only and lists the variants apart."""
    write_run(store, "vanilla", 1.0, 0, 30.0, overrides={"lr": 0.01, "mlp_hidden": [100, 16]})
    write_run(store, "vanilla", 1.0, 1, 32.0, overrides={"lr": 0.01, "mlp_hidden": [100, 16]})
    write_run(store, "vanilla", 1.0, 0, 40.0, overrides={"epochs": 10})
    frame, _ = export_frame(RunStore(store), "cmnist")
    last = frame[(frame["method"] == "vanilla") & (frame["selection"] == "last")]
    assert sorted(zip(last["seed"], last["overrides"], last["accuracy"], strict=True)) == [
        (0, "", 54.0),
        (0, "epochs=10", 40.0),
        (0, "lr=0.01, mlp_hidden=[100,16]", 30.0),
        (1, "", 55.0),
        (1, "lr=0.01, mlp_hidden=[100,16]", 32.0),
        (2, "", 56.0),
    ]
    cells = compare_frame(frame, "cmnist", paper=PAPER)
    vanilla = next(c for c in cells if c.method == "vanilla")
    assert (vanilla.ours_mean, vanilla.n) == (55.0, 3)  # the recipe's three seeds only
    found = variants(frame, "cmnist", "last", "official", "paper")
    assert [(v.overrides, v.mean, v.n) for v in found] == [
        ("epochs=10", 40.0, 1),
        ("lr=0.01, mlp_hidden=[100,16]", 31.0, 2),
    ]
    assert "`lr=0.01, mlp_hidden=[100,16]` | 31.00 ± 1.41 | 2 |" in render_variants(found)
    readme = render_readme(frame, cells, "cmnist", "last", "official", "paper", {}, "cmnist.csv", 3)
    assert "Runs off the recipe" in readme and "`epochs=10`" in readme
    # merged into an export from before the overrides column: rows of the same run replace
    # those rows, variants add theirs (the older rows were all of the recipe)
    old = frame[frame["overrides"] == ""].drop(columns="overrides")
    merged = merge_frames(old.assign(overrides=""), frame)
    assert len(merged) == len(frame)


def test_runs_on_other_data_are_variants_named_by_their_build_options(store: Path) -> None:
    """A run built with ``--data-option`` or ``--data-seed`` off the recipe trains on other
    data: it exports as a variant (``data:NAME=VALUE``), never as a seed of the recipe."""
    write_run(store, "vanilla", 1.0, 0, 30.0, data_options={"data_seed": 0, "severity": 1})
    write_run(store, "vanilla", 1.0, 0, 35.0, data_options={"data_seed": 1})
    frame, _ = export_frame(RunStore(store), "cmnist")
    last = frame[(frame["method"] == "vanilla") & (frame["selection"] == "last")]
    assert sorted(zip(last["seed"], last["overrides"], last["accuracy"], strict=True)) == [
        (0, "", 54.0),
        (0, "data:data_seed=1", 35.0),
        (0, "data:severity=1", 30.0),
        (1, "", 55.0),
        (2, "", 56.0),
    ]
    vanilla = next(c for c in compare_frame(frame, "cmnist", paper=PAPER) if c.method == "vanilla")
    assert (vanilla.ours_mean, vanilla.n) == (55.0, 3)


def evaluation(step: int, acc: float) -> dict[str, Any]:
    """One line of ``metrics.jsonl`` as the engine writes it (steps from 100 on, after the
    step-10 selections of ``write_run``, which have no record here)."""
    return {
        "step": 100 + step,
        "epoch": float(step),
        "valid": metrics(acc + 50),
        "test": metrics(acc),
    }


def test_tail_accuracy_is_the_mean_of_the_last_ten_evaluations() -> None:
    evaluations = [evaluation(k, float(k)) for k in range(1, 13)]
    assert tail_accuracy(evaluations) == sum(range(3, 13)) / 10
    assert tail_accuracy(evaluations[:9]) is None  # too few to say


def test_a_cell_whose_flag_hangs_on_one_evaluation_is_marked(tmp_path: Path) -> None:
    """DisEnt at 1 %: each seed's last evaluation is a spike 2.5 points above the eleven
    before it (82.0, 82.2, 81.9 against 79.49 +- 1.44 in the paper: flagged); the means of
    their last ten evaluations (79.65 to 79.95) are within. The cell is marked and the note
    says so; a cell where both agree (ETF-Debias, tails equal to ``last``) is not."""
    root = tmp_path / "runs"
    for seed, acc in enumerate([82.0, 82.2, 81.9]):
        run = write_run(root, "disent", 1.0, seed, acc, last_step=112)
        for step in range(1, 12):
            run.append_metrics(evaluation(step, acc - 2.5))
        run.append_metrics(evaluation(12, acc))
        etf = write_run(root, "etf_debias", 1.0, seed, 82.0, last_step=110)
        for step in range(1, 11):
            etf.append_metrics(evaluation(step, 82.0))
    frame, _ = export_frame(RunStore(root), "cmnist")
    cells = {c.method: c for c in compare_frame(frame, "cmnist", paper=PAPER)}
    disent, etf_cell = cells["disent"], cells["etf_debias"]
    assert disent.flagged and disent.tail_mean == pytest.approx(79.7833, abs=1e-4)
    assert disent.tail_disagrees and not etf_cell.tail_disagrees and not etf_cell.flagged
    table = render_table(list(cells.values()))
    assert "| DisEnt | 1 | 82.03 ± 0.15 | 3 | 79.49 ± 1.44 | +2.54 | ⚑† |" in table
    assert tail_note(list(cells.values())) == (
        "† The flag rule decides otherwise on the mean of each run's last 10 evaluations "
        "(`last10_accuracy`), so the `last` number sits on one evaluation's dip or spike: "
        "DisEnt 1 %: 79.78 ± 0.15 (within)."
    )
    readme = render_readme(
        frame, list(cells.values()), "cmnist", "last", "official", "paper", {}, "c.csv"
    )
    assert "DisEnt 1 %: 79.78 ± 0.15 (within)." in readme
    # other selections than `last` carry no tail: it is the last model's neighbourhood
    best = compare_frame(frame, "cmnist", selection="best_valid", paper=PAPER)
    assert all(c.tail_mean is None for c in best)
    # a cell with one run that lacks the tail (fewer evaluations) is not decided on tails
    write_run(root, "disent", 1.0, 3, 82.0)
    frame, _ = export_frame(RunStore(root), "cmnist")
    cells = {c.method: c for c in compare_frame(frame, "cmnist", paper=PAPER)}
    assert cells["disent"].tail_mean is None and not cells["disent"].tail_disagrees


def test_two_runs_that_export_as_one_row_are_an_error_naming_both(store: Path) -> None:
    """The recipe's severity given explicitly makes another run id with the recipe's data:
    both would export as seed 0 of the recipe, so the export refuses and names the runs."""
    twin = write_run(store, "vanilla", 1.0, 0, 40.0, data_options={"data_seed": 0, "severity": 4})
    with pytest.raises(ConfigError, match="export as the same row") as error:
        export_frame(RunStore(store), "cmnist")
    assert twin.run_id in str(error.value) and rid("vanilla", 1.0, 0) in str(error.value)


def test_stale_runs_export_only_when_asked_under_the_code_that_trained_them(
    store: Path,
) -> None:
    """A finished run whose method code changed since is stale: listed as not done, unless
    ``stale=True`` asks for the result that older code made (its code_version says which)."""
    run = write_run(store, "lff", 2.0, 0, 60.0, commit="fedcba9876" * 4)
    result = json.loads(run.result_path.read_text())
    run.result_path.write_text(json.dumps({**result, "code": "0" * 16}))
    frame, unfinished = export_frame(RunStore(store), "cmnist")
    assert f"{run.run_id} (stale)" in unfinished and 2.0 not in set(frame["ratio"])
    frame, unfinished = export_frame(RunStore(store), "cmnist", stale=True)
    row = frame[(frame["ratio"] == 2.0) & (frame["selection"] == "last")]
    assert list(row["accuracy"]) == [60.0] and list(row["code_version"]) == ["0.1.0+gfedcba9876"]
    assert all(run.run_id not in u for u in unfinished)


def test_read_csv_of_an_export_before_overrides_reads_them_as_the_recipe(
    store: Path, tmp_path: Path
) -> None:
    frame, _ = export_frame(RunStore(store), "cmnist")
    path = tmp_path / "old.csv"
    frame.drop(columns="overrides").to_csv(path, index=False)
    back = read_csv(path)
    assert set(back["overrides"]) == {""} and set(COLUMNS) <= set(back.columns)


def test_export_all_datasets(store: Path) -> None:
    frame, _ = export_frame(RunStore(store))
    assert set(frame["dataset"]) == {"cmnist", "toy"}


def test_read_csv_rejects_other_files(tmp_path: Path) -> None:
    path = tmp_path / "x.csv"
    path.write_text("method,accuracy\nvanilla,1\n")
    with pytest.raises(ConfigError, match="lacks the columns"):
        read_csv(path)
    with pytest.raises(ConfigError, match="no reproduction CSV"):
        read_csv(tmp_path / "absent.csv")


@pytest.mark.parametrize(
    ("ours", "ours_std", "paper", "paper_std", "flagged"),
    [
        (50.0, 0.5, 48.5, 0.1, False),  # 1.5 < 2 points
        (50.6, 0.5, 48.5, 0.1, True),  # 2.1 > max(2, 0.51)
        (55.0, 4.0, 50.0, 3.0, False),  # 5 = combined std 5: not outside
        (55.1, 4.0, 50.0, 3.0, True),  # 5.1 > 5
        (45.0, None, 48.0, None, True),  # one seed: the 2-point floor applies
        (46.5, None, 48.0, None, False),
    ],
)
def test_flagging_rule(ours, ours_std, paper, paper_std, flagged) -> None:
    assert is_flagged(ours, ours_std, paper, paper_std) is flagged


def test_compare_flags_and_reasons(store: Path) -> None:
    frame, _ = export_frame(RunStore(store), "cmnist")
    explanations = {"cells": {"cmnist": {"vanilla": {"all": "generic", 1.0: "ratio one"}}}}
    cells = {
        c.method: c for c in compare_frame(frame, "cmnist", paper=PAPER, explanations=explanations)
    }
    van, etf, lff, disent = cells["vanilla"], cells["etf_debias"], cells["lff"], cells["disent"]
    assert (van.ours_mean, van.ours_std, van.n) == (55.0, 1.0, 3)
    assert van.flagged and van.reason == "ratio one"  # 6.55 > 2: the ratio entry wins
    assert etf.ours_mean == 82.0 and not etf.flagged and etf.reason == ""
    assert lff.n == 1 and lff.ours_std is None and not lff.flagged  # 71 vs 72.29: < 2 points
    assert disent.n == 0 and disent.diff is None and not disent.flagged  # not run
    other = compare_frame(frame, "cmnist", selection="best_test", paper=PAPER)
    flagged = {c.method: c.reason for c in other if c.flagged}
    assert flagged == {"vanilla": UNEXPLAINED, "etf_debias": UNEXPLAINED}  # 84.0 vs 81.97


def test_explanation_lookup() -> None:
    data = {"cells": {"cmnist": {"lff": {"all": "a", 0.5: "b"}}}}
    assert explanation(data, "cmnist", "lff", 0.5) == "b"
    assert explanation(data, "cmnist", "lff", 1.0) == "a"
    assert explanation(data, "cmnist", "sd", 1.0) == ""
    assert explanation({}, "cmnist", "lff", 1.0) == ""


def test_render_table_and_readme(store: Path) -> None:
    frame, _ = export_frame(RunStore(store), "cmnist")
    explanations = {
        "cells": {"cmnist": {"vanilla": {"all": "longer schedule"}}},
        "notes": ["a recipe note"],
    }
    cells = compare_frame(frame, "cmnist", paper=PAPER, explanations=explanations)
    table = render_table(cells).splitlines()
    assert table[0].startswith("| method | ratio (%) | ours | n | paper | ours − paper | flag")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in table[2:]}
    assert rows["Vanilla"] == (
        "| Vanilla | 1 | 55.00 ± 1.00 | 3 | 48.45 ± 0.06 | +6.55 | ⚑ | longer schedule |"
    )
    assert rows["ETF-Debias"].endswith("| +0.03 |  |  |")
    assert "| LfF | 1 | 71.00 | 1 |" in rows["LfF"]
    assert "| DisEnt | 1 | not run | 0 | 79.49 ± 1.44 | – |" in rows["DisEnt"]
    readme = render_readme(
        frame,
        cells,
        "cmnist",
        "last",
        "official",
        "paper",
        explanations,
        "cmnist.csv",
        now=datetime(2026, 11, 23, 22, 15, tzinfo=UTC),
    )
    assert "Generated 2026-11-23 22:15 UTC" in readme
    assert "Device: cpu" in readme
    assert "1 of 3 compared cells flagged." in readme
    assert "| +6.55 | ⚑ | (1) |" in readme  # numbered: the reason under the table
    assert "Reasons for the flagged cells:\n\n1. longer schedule\n" in readme
    assert "- LfF: 1 of 3 seeds at 1 %" in readme and "- DisEnt: 0 of 3 seeds at 1 %" in readme
    assert "- Vanilla" not in readme and "- ETF-Debias" not in readme
    assert readme.rstrip().endswith("- a recipe note")


def test_cli_export_and_table(store: Path, tmp_path: Path, capsys) -> None:
    csv = tmp_path / "res" / "cmnist.csv"
    assert (
        main(["reproduce", "export", "--out", str(store), "--dataset", "cmnist", "-o", str(csv)])
        == 0
    )
    assert f"not done: {rid('lff', 1.0, 1)}" in capsys.readouterr().err
    readme = tmp_path / "res" / "README.md"
    expl = tmp_path / "none.yaml"
    assert (
        main(["reproduce", "table", str(csv), "--explanations", str(expl), "--readme", str(readme)])
        == 0
    )
    out = capsys.readouterr().out
    assert "| Vanilla | 1 | 55.00 ± 1.00 | 3 | 48.45 ± 0.06 | +6.55 | ⚑ | UNEXPLAINED |" in out
    assert "| ETF-Debias | 0.5 | not run | 0 | 71.63 ± 0.28 |" in out  # the paper's own cells
    assert main(["reproduce", "table", str(csv), "--explanations", str(expl), "--numbered"]) == 0
    out = capsys.readouterr().out
    assert "| +6.55 | ⚑ | (1) |" in out and "(1) UNEXPLAINED" in out
    assert readme.read_text().startswith("# Reproduction: cmnist against the ETF-Debias paper")


def test_lc_and_denetdm_are_compared_with_their_own_papers_under_their_selection(
    store: Path, tmp_path: Path, capsys
) -> None:
    """LC's runs leave the ETF-Debias paper's table (it has no LC numbers) for a section of
    their own: compared with Liu et al.'s 82.25 at 1 % under ``best_test`` (the selection whose
    number their code reports), with the paper named, beside DeNetDM's published cells."""
    for seed, acc in enumerate([78.0, 80.0, 82.0]):
        write_run(store, "lc", 1.0, seed, acc)  # best_test = acc + 2
    csv, readme = tmp_path / "cmnist.csv", tmp_path / "README.md"
    assert (
        main(["reproduce", "export", "--out", str(store), "--dataset", "cmnist", "-o", str(csv)])
        == 0
    )
    args = ["reproduce", "table", str(csv), "--explanations", str(tmp_path / "none.yaml")]
    assert main([*args, "--readme", str(readme), "--numbered"]) == 0
    out = capsys.readouterr().out
    main_table, section = out.split("## DeNetDM, LC against their own papers")
    assert "| LC |" not in main_table and "| Vanilla | 1 | 55.00 ± 1.00 |" in main_table
    assert "selection `best_test`" in section and "Liu et al., Avoiding Spurious" in section
    # the same runs' last model beside the compared best-test number, never compared
    assert "| LC | 1 | 82.00 ± 2.00 | 3 | 82.25 | -0.25 |  |  | 80.00 ± 2.00 |" in section
    assert "Column `ours, last`: the same runs' last model" in section
    assert "| LC | 0.5 | not run | 0 | 71.25 | – |  |  | – |" in section
    assert "| DeNetDM | 1 | not run | 0 | 85.22 ± 0.76 |" in section
    assert "ours, `last`" not in main_table  # a `last` table has no second `last` column
    assert "## DeNetDM, LC against their own papers" in readme.read_text()


def test_git_commit_of_a_copy_without_git_comes_from_its_stamped_commit_file(tmp_path: Path):
    """`git archive` fills bench/COMMIT in (export-subst): a frozen copy still names its commit."""
    assert git_commit(tmp_path) is None  # no checkout, no COMMIT file
    (tmp_path / "COMMIT").write_text("$Format:%H$\n")  # as committed: not filled in
    assert git_commit(tmp_path) is None
    (tmp_path / "COMMIT").write_text("0123abcdef" * 4 + "\n")
    assert git_commit(tmp_path) == "0123abcdef" * 4
    assert (REPO / ".gitattributes").read_text().split() == ["bench/COMMIT", "export-subst"]


@pytest.mark.realdata
def test_reproduce_run_trains_the_tables_grid_and_ends_in_the_export(
    tmp_path, raw_root, data_root, monkeypatch, capsys
):
    """`bench reproduce run`: one command from an empty store to the CSV, the comparison, the
    plot and the paper's tables; rerun, it trains nothing and writes the same CSV."""
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw_root))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data_root))
    results, store = tmp_path / "results", tmp_path / "store"
    command = [
        "reproduce", "run", "--out", str(store), "--tables", "synthetic", "--datasets",
        "cmnist", "--methods", "vanilla", "--ratios", "1", "--seeds", "0", "--preset", "ci",
        "--launcher", "inline", "--results", str(results),
    ]  # fmt: skip
    assert main(command) == 0
    assert "1 ran, 0 failed" in capsys.readouterr().err
    assert {p.name for p in results.iterdir()} == {
        "cmnist.csv",
        "cmnist.md",
        "cmnist.png",
        "tables.md",
    }
    frame = read_csv(results / "cmnist.csv")
    assert set(frame["selection"]) >= {"last", "best_valid", "best_test"}
    assert set(frame["preset"]) == {"ci"} and set(frame["method"]) == {"vanilla"}
    (run,) = RunStore(store).runs()
    last = frame[frame["selection"] == "last"]["accuracy"].item()
    assert last == pytest.approx(run.result()["selections"]["last"]["test"]["accuracy"], abs=1e-3)
    assert "| Vanilla | 1 |" in (results / "cmnist.md").read_text()
    assert "the paper's Table 1" in (results / "tables.md").read_text()

    before = (results / "cmnist.csv").read_text()
    assert main(command) == 0
    assert "0 ran, 0 failed" in capsys.readouterr().err
    assert (results / "cmnist.csv").read_text() == before


def test_reproduce_run_refuses_tables_and_datasets_the_paper_lacks(tmp_path, capsys):
    out = ["--out", str(tmp_path / "store"), "--dry-run"]
    assert main(["reproduce", "run", "--tables", "table9", *out]) == 2
    assert "no table 'table9'" in capsys.readouterr().err
    assert main(["reproduce", "run", "--tables", "real", "--datasets", "cmnist", *out]) == 2
    err = capsys.readouterr().err
    assert "--datasets cmnist: not in the tables real" in err
    assert "bffhq, dogs_and_cats, bar" in err
    assert not (tmp_path / "store").exists()
