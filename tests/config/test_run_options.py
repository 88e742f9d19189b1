"""`bench run` options that shape the grid: --data-option and --ablation (dry runs)."""

from __future__ import annotations

from debias_bench.cli import main


def test_unknown_data_option_lists_the_valid_ones(capsys, tmp_path):
    code = main(
        [
            "run",
            "--datasets",
            "cmnist",
            "--data-option",
            "severit=3",
            "--dry-run",
            "--out",
            str(tmp_path),
        ]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert "unknown data option(s) severit" in err and "severity" in err


def test_data_option_changes_the_run_identity_only_where_it_applies(capsys, tmp_path):
    base = [
        "run",
        "--datasets",
        "cmnist,bar",
        "--ratios",
        "1",
        "--preset",
        "smoke",
        "--dry-run",
        "--out",
        str(tmp_path),
    ]
    assert main(base) == 0
    plain = capsys.readouterr().out.split()
    assert main([*base, "--data-option", "severity=3"]) == 0
    changed = capsys.readouterr().out.split()
    cmnist = [r for r in plain if r.startswith("cmnist")]
    bar = [r for r in plain if r.startswith("bar")]
    assert cmnist and bar
    assert not set(cmnist) & set(changed)  # cmnist has a severity: new runs
    assert set(bar) <= set(changed)  # BAR has none: the same runs


def test_ablation_adds_one_run_per_value(capsys, tmp_path):
    args = [
        "run",
        "--methods",
        "vanilla,etf_debias",
        "--datasets",
        "cmnist",
        "--ratios",
        "5",
        "--seeds",
        "0,1",
        "--ablation",
        "alpha",
        "--dry-run",
        "--out",
        str(tmp_path),
    ]
    assert main(args) == 0
    runs = [line.split()[1] for line in capsys.readouterr().out.splitlines()]
    assert len(runs) == 6 * 2 and all("etf_debias" in r for r in runs)
