"""The issue's end to end check on the fixtures (official layouts): `bench run --methods
vanilla,groupdro --datasets waterbirds,celeba --preset smoke` trains (a ResNet-20 at 16 px,
nothing to download), and `bench report --table subpop` shows worst-group accuracy for both,
under `--selection best_valid_worst_group` too; the paper preset's ResNet-50 names its missing
weights."""

from __future__ import annotations

from debias_bench.cli import main
from debias_bench.datasets import celeba, waterbirds
from debias_bench.datasets.resnet50 import WEIGHT_FILES


def test_smoke_grid_trains_and_the_subpop_table_shows_worst_group(tmp_path, capsys):
    raw, data, out = tmp_path / "raw", tmp_path / "data", tmp_path / "runs"
    waterbirds.write_release(raw / "waterbirds" / waterbirds.RELEASE)
    celeba.write_release(raw / "celeba")
    argv = ["run", "--methods", "vanilla,groupdro", "--datasets", "waterbirds,celeba"]
    argv += ["--preset", "smoke", "--raw-root", str(raw), "--data-root", str(data)]
    assert main([*argv, "--out", str(out)]) == 0
    capsys.readouterr()
    for selection in ("last", "best_valid_worst_group"):
        report = ["report", "--table", "subpop", "--out", str(out), "--selection", selection]
        assert main(report) == 0
        text = capsys.readouterr().out
        assert f"model selection `{selection}`" in text
        rows = [
            r for r in text.splitlines() if r.startswith("| waterbirds") or r.startswith("| celeba")
        ]
        assert len(rows) == 4, text
        for row in rows:
            cells = [c.strip() for c in row.strip("|").split("|")]
            assert cells[1] in ("5.0", "44.9") and float(cells[4]) <= float(cells[3]), row
        assert "waterbirds 5 % Vanilla: class" in text and "celeba 44.9 % GroupDRO: class" in text


def test_the_paper_recipe_names_the_missing_resnet50_weights(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch"))
    monkeypatch.delenv("BENCH_RESNET50_WEIGHTS", raising=False)
    raw, out = tmp_path / "raw", tmp_path / "runs"
    waterbirds.write_release(raw / "waterbirds" / waterbirds.RELEASE)
    argv = ["run", "--methods", "vanilla", "--datasets", "waterbirds", "--set", "steps=1"]
    argv += ["--raw-root", str(raw), "--data-root", str(tmp_path / "data"), "--out", str(out)]
    capsys.readouterr()
    assert main(argv) == 2  # before any run starts (launchers.preflight.check_weights)
    err = capsys.readouterr().err
    assert "pretrained weights missing; nothing was started" in err
    assert WEIGHT_FILES[0] in err and "resnet50_pretrained: " in err
    assert str(tmp_path / "torch" / "hub" / "checkpoints") in err
    assert not list(out.glob("*/status.json"))
