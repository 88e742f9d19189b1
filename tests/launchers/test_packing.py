"""Issue 51, item 4: ``--jobs-per-gpu auto`` on a CPU, with a fake device inventory (two 80 GiB
GPUs) and a fake ``bench perf --json`` file: the choice, not the speed."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from debias_bench.cli import main
from debias_bench.errors import ConfigError
from debias_bench.launchers.factories import LaunchContext, build_launcher
from debias_bench.launchers.packing import Gpu, choose, read_perf
from debias_bench.runs.store import RunStore

GIB_MB = 1024.0
H100 = "NVIDIA H100 80GB HBM3"
# (dataset, method): (peak MB, ms per step), as `bench perf --device cuda` would measure them
MEASURED = {
    ("cmnist", "vanilla"): (150.0, 2.4),  # the MLP: launch-bound, tiny
    ("bffhq", "vanilla"): (30 * GIB_MB, 5.0),  # a ResNet whose peak is 30 GiB
    ("bffhq", "selecmix"): (15_170.0, 476.8),  # keeps the GPU busy alone
}


def perf_json(path, device_type="cuda", measured=MEASURED):
    rows = [
        {"dataset": d, "method": m, "peak_mb": mb, "ms_per_step": ms, "error": None}
        for (d, m), (mb, ms) in measured.items()
    ]
    rows.append({"dataset": "cmnist", "method": "lc", "peak_mb": None, "ms_per_step": None,
                 "error": "cell timed out"})  # fmt: skip
    device = f"CUDA {H100}" if device_type == "cuda" else "CPU AMD EPYC, 2 threads"
    data = {"device": device, "device_type": device_type, "summary": rows}
    path.write_text(json.dumps(data))
    return path


TWO_GPUS = [Gpu(H100, 80 * GIB_MB)] * 2


def test_each_cell_gets_what_fits_its_memory_and_step_time(tmp_path):
    perf = read_perf(perf_json(tmp_path / "perf.json"))
    one = {cell: choose([cell], perf, TWO_GPUS, cores=64) for cell in MEASURED}
    tiny, resnet, selecmix = (one[cell] for cell in MEASURED)
    assert tiny.jobs == 8 and "step time: 2.4 ms alone, launch-bound" in tiny.cells[0].why
    assert resnet.jobs == 2 and resnet.cells[0].why.startswith("memory: 30.0 GiB peak")
    assert selecmix.jobs == 1 and "keeps the GPU busy" in selecmix.cells[0].why
    # host cores bound a launch-bound cell: each run's host thread launches its kernels
    few_cores = choose([("cmnist", "vanilla")], perf, TWO_GPUS, cores=6)
    assert few_cores.jobs == 3 and "host cores: 3 per GPU" in few_cores.cells[0].why


def test_the_sweep_takes_its_smallest_cell_and_an_unmeasured_cell_gets_1_and_is_named(tmp_path):
    perf = read_perf(perf_json(tmp_path / "perf.json"))
    sweep = [("cmnist", "vanilla"), ("bffhq", "vanilla")]
    assert choose(sweep, perf, TWO_GPUS, cores=64).jobs == 2
    packing = choose([*sweep, ("cmnist", "lc")], perf, TWO_GPUS, cores=64)
    assert packing.jobs == 1 and packing.unmeasured == [("cmnist", "lc")]
    text = "\n".join(packing.lines())
    assert "not measured on a GPU, so 1: cmnist lc" in text
    assert (
        "bench perf --device cuda --datasets cmnist,bffhq --methods vanilla,lc --repeats 1 "
        f"--json {tmp_path / 'perf.json'}" in text
    )
    assert "cmnist vanilla: 8 (step time" in text and "bffhq vanilla: 2 (memory" in text


def test_a_cpu_measurement_or_no_file_measures_nothing(tmp_path):
    cpu = read_perf(perf_json(tmp_path / "cpu.json", device_type="cpu"))
    packing = choose([("cmnist", "vanilla")], cpu, TWO_GPUS, cores=64)
    assert packing.jobs == 1 and "not a GPU" in "\n".join(packing.lines())
    missing = read_perf(tmp_path / "none.json")
    assert "does not exist" in "\n".join(
        choose([("cmnist", "vanilla")], missing, TWO_GPUS, 4).lines()
    )
    (tmp_path / "bad.json").write_text("{}")
    with pytest.raises(ConfigError, match="not the output of `bench perf --json`"):
        read_perf(tmp_path / "bad.json")


@pytest.fixture
def fake_gpus(monkeypatch):
    """Two visible 80 GiB GPUs, as torch would report them."""
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "3,5")
    monkeypatch.setattr("torch.cuda.is_available", lambda: True)
    monkeypatch.setattr("torch.cuda.device_count", lambda: 2)
    props = SimpleNamespace(name=H100, total_memory=80 * 2**30)
    monkeypatch.setattr("torch.cuda.get_device_properties", lambda index: props)
    monkeypatch.setattr("debias_bench.launchers.local.cpu_cores", lambda: 64)


def test_the_local_launcher_packs_by_the_perf_json_in_out(tmp_path, fake_gpus, toy_place, capsys):
    store = RunStore(tmp_path / "runs")
    store.root.mkdir()
    perf_json(store.root / "perf.json")  # the default place: perf.json in --out
    ctx = LaunchContext(store, toy_place, device="cuda", cells=(("bffhq", "vanilla"),))
    launcher = build_launcher("local", {"jobs_per_gpu": "auto"}, ctx)
    try:
        assert sorted(s.gpu for s in launcher.pool.slots) == ["3", "3", "5", "5"]
    finally:
        launcher.close()
    assert "--jobs-per-gpu auto: 2 run(s) per GPU on 2 x NVIDIA H100" in capsys.readouterr().err
    with pytest.raises(ConfigError, match="--perf-json is read by --jobs-per-gpu auto only"):
        build_launcher("local", {"jobs_per_gpu": 2, "perf_json": "x.json"}, ctx)


def run(capsys, *flags):
    code = main(["run", "--methods", "vanilla", "--datasets", "toy", "--ratios", "5",
                 "--launcher", "local", *flags])  # fmt: skip
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err


@pytest.mark.parametrize("value", ["many", "2.5", "0", ""])
def test_a_value_not_a_number_or_auto_is_refused_naming_both(capsys, tmp_path, value):
    code, err = run(capsys, "--out", str(tmp_path / "runs"), "--jobs-per-gpu", value)
    assert code == 2
    assert f"argument --jobs-per-gpu: must be int >= 1 and <= 1024 or auto, not {value!r}" in err


def test_auto_without_a_gpu_says_cpu_runs_use_workers(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BENCH_RAW_ROOT", str(tmp_path / "raw"))
    monkeypatch.setenv("BENCH_DATA_ROOT", str(tmp_path / "data"))
    code, err = run(capsys, "--out", str(tmp_path / "runs"), "--device", "cpu",
                    "--jobs-per-gpu", "auto")  # fmt: skip
    assert code == 2
    assert "--jobs-per-gpu auto packs runs on GPUs, and this sweep runs on the CPU" in err
    assert "CPU runs use --workers N" in err
    assert not (tmp_path / "runs").exists()
