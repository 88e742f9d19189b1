"""A run whose training loss becomes NaN ends as failed (reason: diverged), never as a number.

Reproduces issue 14's case on real Colored MNIST with the ``ci`` preset: SGD at lr 1e6 used to
end ``done`` with 7.6 % shown in bold by ``bench report``.
"""

from __future__ import annotations

import json

import pytest

from debias_bench.cli import main
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import _finite

pytestmark = pytest.mark.realdata


def _strict(text: str) -> object:
    def refuse(constant: str) -> None:
        raise ValueError(f"non-standard JSON constant {constant}")

    return json.loads(text, parse_constant=refuse)


def test_metrics_records_are_strict_json():
    record = {"step": 3, "train": {"loss": float("nan")}, "nc": [1.0, float("inf")]}
    assert _strict(json.dumps(_finite(record))) == {
        "step": 3, "train": {"loss": None}, "nc": [1.0, None]
    }  # fmt: skip


def test_a_diverged_run_fails_by_name_and_gives_no_number(
    tmp_path, raw_root, data_root, monkeypatch, capsys
):
    monkeypatch.setenv("BENCH_RAW_ROOT", str(raw_root))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(data_root))
    out = tmp_path / "runs"
    grid = ["--methods", "vanilla", "--datasets", "cmnist", "--ratios", "5", "--seeds", "0"]
    args = [*grid, "--preset", "ci", "--protocol", "clean", "--out", str(out)]
    bad = ["--set", "optimizer=sgd", "--set", "lr=1e6"]

    assert main(["run", *args, *bad]) == 1
    err = capsys.readouterr().err
    assert "not every run is done (1 failed)" in err

    (run,) = RunStore(out).runs()
    status = run.status()
    assert status["state"] == "failed" and status["reason"] == "diverged"
    assert status["error"].startswith("diverged at step ") and status["step"] > 0
    assert run.result() is None
    if run.metrics_path.exists():  # evaluations before the divergence, if any
        for line in run.metrics_path.read_text().splitlines():
            _strict(line)  # strict JSON: no bare NaN
    assert len(status["data_fingerprint"]) >= 16  # recorded when the run started

    assert main(["status", "--out", str(out), "--failed"]) == 0
    shown = capsys.readouterr()
    assert "diverged" in shown.out + shown.err

    assert main(["report", "--out", str(out), "--table", "synthetic", "--format", "markdown"]) == 0
    (row,) = [line for line in capsys.readouterr().out.splitlines() if line.startswith("| cmnist")]
    cell = row.split("|")[3]
    assert ("failed" in cell or "diverged" in cell) and not any(c.isdigit() for c in cell), row

    # without the bad settings the same grid trains to a number, on the same data
    good = tmp_path / "good"
    assert main(["run", *args[:-1], str(good)]) == 0
    capsys.readouterr()
    (done,) = RunStore(good).runs()
    assert done.result()["data_fingerprint"] == status["data_fingerprint"]
