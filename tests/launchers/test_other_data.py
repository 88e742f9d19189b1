"""A done run trained on other data than the data prepared now is not skipped silently (issue
48): after ``bench data prepare --force`` rebuilt Colored MNIST from other raw files, the same
``bench run`` said only "1 runs (1 already done)". It now says, in one line, which runs, both
fingerprints and the fix; moved aside, the run trains afresh on the current data."""

from __future__ import annotations

from support.fixture_data import FixtureData

from debias_bench.cli import main
from debias_bench.datasets.cmnist import ColoredMNIST
from debias_bench.runs.store import RunStore

TINY_RUN = ["run", "--methods", "vanilla", "--seeds", "0", "--device", "cpu", "--ratios", "1"]
TINY_RUN += ["--datasets", "cmnist", "--set", "steps=4", "--set", "eval_every=2"]
TINY_RUN += ["--set", "batch_size=16"]


def test_a_done_run_on_other_data_is_named_with_the_fix(tmp_path, monkeypatch, capsys):
    built = FixtureData.prepared(ColoredMNIST, tmp_path)
    monkeypatch.setenv("BENCH_RAW_ROOT", str(built.raw))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(built.data))
    out = tmp_path / "runs"
    argv = [*TINY_RUN, "--out", str(out), *built.option_args()]
    assert main(argv) == 0
    (run,) = RunStore(out).runs()
    old = run.result()["data_fingerprint"]
    capsys.readouterr()

    assert main(argv) == 0  # the same data: nothing to say
    assert "other data" not in capsys.readouterr().err

    built.family().write_fixture(per_class=40)  # other raw files, the same build options
    assert built.prepare_command("--force") == 0
    now = built.family().fingerprint(1)
    assert now != old
    capsys.readouterr()
    assert main(argv) == 0
    err = capsys.readouterr().err
    note = (
        f"note: 1 done run of cmnist at 1% was trained on other data (data fingerprint {old}, "
        f"now {now}): kept as done, not retrained; to retrain one on this data, "
        f"mv {run.path} {run.path}.bad and run the same grid again"
    )
    assert note in err, err  # was: "1 runs (1 already done)" and nothing else

    run.path.rename(f"{run.path}.bad")  # the fix
    assert main(argv) == 0
    (again,) = RunStore(out).runs()
    # trained on the rebuilt data, also in this process: its data cache read the old build,
    # and was used again (the old fingerprint recorded) before it compared the manifest's
    assert again.result()["data_fingerprint"] == now
