"""Live progress: a running run's heartbeat carries its step, steps/s and ETA from the first
step on; ``bench status`` and the sweep's summary line show them and take the sweep's ETA
from them; in a log, a progress line at the first step and then at most every 30 s."""

from __future__ import annotations

import contextlib
import io
import threading
import time
from collections import Counter

import torch
from support.planted import selections

from debias_bench.cli import main
from debias_bench.config.run_config import RunConfig, make_config
from debias_bench.launchers.run_one import _Recorded, _start, run_one
from debias_bench.launchers.scheduler import (
    Ended,
    Launcher,
    LiveSummary,
    Policy,
    SweepLoop,
    Task,
    summary_line,
)
from debias_bench.runs.eta import sweep_eta
from debias_bench.runs.heartbeat import Heartbeat
from debias_bench.runs.progress import Live, LogLines, Pace, Progress
from debias_bench.runs.provenance import config_json
from debias_bench.runs.states import Decision, RunState
from debias_bench.runs.store import RunStore
from debias_bench.session.status import collect, counts_and_eta
from debias_bench.tracking.session import RunTracking


def test_pace_times_the_steps_after_the_first():
    pace = Pace(total=100, start_step=0)
    assert pace.advance(1) is True and pace.steps_per_s() is None  # set-up is not timed
    assert pace.fields() == {"step": 1, "total_steps": 100, "steps_per_s": None, "eta_s": None}
    pace.advance(11)
    pace.first_at -= 10.0  # ten steps in ten seconds
    assert abs(pace.steps_per_s() - 1.0) < 0.01
    fields = pace.fields()
    assert fields["step"] == 11 and abs(fields["eta_s"] - 89) < 1
    assert pace.text().startswith("step 11/100 (11 %), 1 steps/s, ETA 1m2")


def test_sweep_eta_uses_the_running_runs_own_etas():
    running = [("a", Live(50, 100, 2.0, eta_s=25.0, elapsed_s=25.0))]
    # nothing finished yet: a run still to start takes a running run's projected 50 s
    assert sweep_eta([], ["a", "a"], running, parallel=1) == 25 + 2 * 50
    assert sweep_eta([], ["a", "a"], running, parallel=3) == (25 + 2 * 50) / 3
    assert sweep_eta([("a", 40.0)], ["a"], running, parallel=1) == 25 + 40
    assert sweep_eta([("a", 40.0)], [], [("a", Live(1, 100, eta_s=99.0))], parallel=4) == 99
    assert sweep_eta([], [None], [("a", None)], parallel=1) is None  # nothing tells yet
    assert sweep_eta([], [], [], parallel=1) == 0.0


def test_sweep_eta_counts_each_run_still_to_start_by_its_kind():
    """A sweep of fast Vanilla runs then slow ETF-Debias ones: the ETF-Debias runs still to
    start take the ETF-Debias durations, not the mean of the Vanilla runs done first."""
    finished = [("cmnist/vanilla", 170.0), ("cmnist/vanilla", 170.0), ("cmnist/etf", 830.0)]
    waiting = ["cmnist/etf", "cmnist/etf", "cmnist/vanilla"]
    assert sweep_eta(finished, waiting, [], parallel=1) == 830 * 2 + 170
    # a kind none of which has finished: a running one's projection, else the overall mean
    running = [("cmnist/lff", Live(10, 100, eta_s=300.0, elapsed_s=100.0))]
    assert sweep_eta(finished, ["cmnist/lff"], running, parallel=1) == 300 + 400
    mean = sum(d for _, d in finished) / 3
    assert sweep_eta(finished, ["bar/lff", None], [], parallel=1) == 2 * mean


def test_live_progress_from_a_status_takes_off_the_time_since_the_heartbeat():
    now = 1000.0
    status = {"state": "running", "step": 10, "total_steps": 100, "steps_per_s": 2.0}
    status.update(eta_s=45.0, heartbeat=now - 5, started=now - 20)
    live = Live.from_status(status, now=now)
    assert live == Live(10, 100, 2.0, eta_s=40.0, elapsed_s=20.0)
    assert live.text() == "step 10/100, 2 steps/s, ETA 40s"
    assert Live.from_status({**status, "state": "done"}) is None


def test_summary_line_shows_the_running_runs_progress():
    counts = Counter(done=1, running=1, pending=2)
    line = summary_line(counts, 4, 90.0, [Live(10, 100, 2.0, 45.0)])
    expected = "1 done, 1 running (step 10/100, 2 steps/s, ETA 45s), 0 failed, 2 pending (of 4)"
    assert line == expected + "; ETA 1m30s"
    two = summary_line(Counter(running=2), 2, None, [Live(10, 100, 2.0), Live(30, 100, 3.0)])
    assert two.startswith("0 done, 2 running (20 % of their steps, 5 steps/s)")
    stream = io.StringIO()
    live = LiveSummary(4, stream, min_gap_s=0.0, every_s=30.0)
    live.update(counts, 90.0, running=[Live(10, 100, 2.0)])
    live.update(counts, 80.0, running=[Live(20, 100, 2.0)])  # same counts: not again at once
    assert stream.getvalue().count("[sweep]") == 1


def test_log_lines_start_at_the_first_step_then_at_most_every_30_s():
    stream = io.StringIO()
    log = LogLines("    ", every_s=30.0, stream=stream)
    log.start("r", 100, 0)
    log.advance(1)
    for step in range(2, 50):
        log.advance(step)
    assert stream.getvalue().splitlines() == ["    step 1/100 (1 %)"]
    log.last -= 31  # half a minute later
    log.advance(50)
    record = {"step": 100, "test": {"accuracy": 61.3, "conflicting_accuracy": 55.0}}
    log.evaluated(record)  # the last evaluation is always shown
    lines = stream.getvalue().splitlines()
    assert lines[1].startswith("    step 50/100 (50 %), ") and "steps/s, ETA" in lines[1]
    assert lines[2].endswith(": test 61.3 | confl 55.0")


class _Slow(Progress):
    def advance(self, step: int) -> None:
        time.sleep(0.02)


def test_a_running_run_reports_its_step_pace_and_eta(tmp_path, toy_place, monkeypatch):
    monkeypatch.setattr(Heartbeat.__init__, "__defaults__", (0.2,))  # every 0.2 s, not 10 s
    overrides = {"steps": 150, "eval_every": 150, "batch_size": 32}
    config = make_config("vanilla", "toy", 20, 0, protocol="clean", overrides=overrides)
    store = RunStore(tmp_path / "runs")
    args = (config, store, toy_place, torch.device("cpu"), _Slow())
    run = threading.Thread(target=run_one, args=args)
    run.start()
    seen = []
    while run.is_alive():
        with contextlib.suppress(Exception):
            seen.append(store.run(config.run_id).status())
        time.sleep(0.05)
    run.join()
    running = [s for s in seen if s.get("state") == "running" and s.get("total_steps")]
    assert running and min(s["step"] for s in running) <= 5  # reported from the first steps
    paced = [s for s in running if s.get("eta_s") is not None and 0 < s["step"] < 150]
    assert len({s["step"] for s in paced}) >= 3  # between evaluations, not only at them
    assert all(s["steps_per_s"] > 0 and s["eta_s"] >= 0 for s in paced)  # 0.0: under 0.05 s
    assert store.run(config.run_id).status()["state"] == "done"


def test_bench_status_shows_a_running_runs_pace_and_the_eta(tmp_path, capsys):
    store = RunStore(tmp_path)
    config = make_config("vanilla", "toy", 20, 0)
    run_dir = store.run(config.run_id)
    run_dir.plan(config_json(config))
    with run_dir.claim():  # this process runs it
        pace = {"step": 10, "total_steps": 100, "steps_per_s": 2.0, "eta_s": 45.0}
        run_dir.transition(RunState.RUNNING, started=time.time() - 5, **pace)
        pending = store.run(make_config("vanilla", "toy", 20, 1).run_id)
        pending.plan(config_json(make_config("vanilla", "toy", 20, 1)))
        assert main(["status", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "10/100 (2/s, ETA 4" in out  # 45 s, less the moment since the heartbeat
    assert "1 running (step 10/100, 2 steps/s, ETA 4" in out
    assert "1 pending (of 2); ETA 1m3" in out  # 45 s left + one more run of 5 + 45 s


def test_a_resumed_run_shows_no_pace_until_its_own_steps_are_timed(tmp_path):
    """A resumed sweep read "35.9 steps/s, ETA 0s": the status still held the pace and ETA
    its interrupted start had written, less the hours since (clipped to 0 s)."""
    store = RunStore(tmp_path)
    config = make_config("vanilla", "toy", 20, 0)
    run_dir = store.run(config.run_id)
    run_dir.plan(config_json(config))
    with run_dir.claim():
        left = {"step": 500, "total_steps": 1000, "steps_per_s": 35.9, "eta_s": 13.9}
        run_dir.transition(RunState.RUNNING, started=time.time() - 3600, heartbeat=0.0, **left)
        run_dir.transition(RunState.INTERRUPTED, ended=time.time() - 3000)
        _start(run_dir, Decision(True, RunState.RUNNING), torch.device("cpu"), {})
        loading = Live.from_status(run_dir.status())  # data and checkpoint still loading
        _Recorded(run_dir, None, RunTracking([], run_dir, "test")).start(config.run_id, 1000, 500)
        resumed = Live.from_status(run_dir.status())
    for live in (loading, resumed):
        assert live is not None and (live.step, live.total) == (500, 1000)
        assert live.steps_per_s is None and live.eta_s is None
        assert live.text() == "step 500/1000"


class _Starts(Launcher):
    """Starts one run at a time and never ends it (the test plays its worker)."""

    def __init__(self) -> None:
        self.now: list[Task] = []

    def free(self) -> int:
        return 1 - len(self.now)

    def start(self, tasks: list[Task]) -> None:
        self.now += tasks

    def poll(self) -> list[Ended]:
        return []

    def active(self) -> dict[str, str]:
        return dict.fromkeys((t.run_id for t in self.now), "running")

    def stop(self) -> None:
        pass


def _done(store: RunStore, seed: int, preset: str, seconds: float) -> None:
    """A done run of ``preset`` whose one start took ``seconds``."""
    config = make_config("vanilla", "toy", 20, seed, preset=preset)
    run_dir = store.run(config.run_id)
    run_dir.plan(config_json(config))
    run_dir.transition(RunState.RUNNING, attempt=1, started=1000.0, resumed_from=0)
    result = {"method": "vanilla", "selections": selections(), "train_time_s": 1.0}
    run_dir.write_result(result)
    run_dir.transition(RunState.DONE, exit_code=0, ended=1000.0 + seconds, total_steps=100)


def _quick_sweep(store: RunStore) -> tuple[list[RunConfig], SweepLoop, io.StringIO]:
    """A sweep of four quick runs over ``store``, beside two done quick runs of 20 s each,
    with its first run started (by ``_Starts``: the test plays the worker) and the rest
    queued; the summary lines go to the returned stream."""
    for seed in (0, 1):
        _done(store, seed, "quick", 20.0)
    configs = [make_config("vanilla", "toy", 20, seed, preset="quick") for seed in (10, 11, 12, 13)]
    stream = io.StringIO()
    loop = SweepLoop(_Starts(), configs, store, Policy(), {}, LiveSummary(4, stream, 0.0))
    for config in configs:  # planned (pending), then queued by the sweep
        store.run(config.run_id).plan(config_json(config))
        loop.settle(config, loop.decide(config.run_id))
    loop.fill_free_slots()  # the first one starts
    return configs, loop, stream


def test_the_sweep_and_bench_status_show_one_eta_for_one_store(tmp_path):
    """Issue 39.6: bench status read ETA 2h28m while the sweep said 18m12s. Done runs of
    another preset (here paper, 1000 s each) took part in status's estimate of a quick run,
    and the two counted finished runs and parallelism each their own way."""
    store = RunStore(tmp_path)
    for seed in (0, 1):
        _done(store, seed, "paper", 1000.0)
    configs, loop, stream = _quick_sweep(store)
    running = store.run(configs[0].run_id)
    with running.claim():  # this process plays its worker
        pace = {"step": 50, "total_steps": 100, "steps_per_s": 10.0, "eta_s": 5.5}
        running.transition(RunState.RUNNING, attempt=1, started=time.time() - 5, **pace)
        running.heartbeat()
        loop.read_progress()
        loop.report(force=True)
        counts, eta = counts_and_eta(collect(store))
    sweep_line = stream.getvalue().strip().splitlines()[-1]
    assert eta is not None and abs(eta - (5.5 + 3 * 20)) < 0.5  # the quick runs' 20 s each
    assert sweep_line.endswith("; ETA 1m05s")
    assert sweep_line.split("; ETA ")[-1] == summary_line(counts, 8, eta).split("; ETA ")[-1]


def test_a_run_another_sweep_trains_counts_as_running_there(tmp_path):
    """Two sweeps over one store, one run each at a time: each counted the other's running
    run as one still to start, in series with its own, and said ETA 1h12m where bench status
    (and the end, 30 min later) agreed on half that."""
    configs, loop, stream = _quick_sweep(RunStore(tmp_path))  # the second still queued here
    store = loop.store
    ours, theirs = store.run(configs[0].run_id), store.run(configs[1].run_id)
    with ours.claim(), theirs.claim():  # this process plays both workers
        for run_dir, eta_s in ((ours, 5.5), (theirs, 8.0)):
            pace = {"step": 50, "total_steps": 100, "steps_per_s": 10.0, "eta_s": eta_s}
            run_dir.transition(RunState.RUNNING, attempt=1, started=time.time() - 5, **pace)
            run_dir.heartbeat()
        loop.watch()
        loop.report(force=True)
        _, eta = counts_and_eta(collect(store))
    sweep_line = stream.getvalue().strip().splitlines()[-1]
    # both running (5.5 s and 8 s left), two still to start at 20 s each, spread over two
    assert eta is not None and abs(eta - (5.5 + 8.0 + 2 * 20) / 2) < 0.5
    assert sweep_line.endswith("; ETA 26s"), sweep_line
    assert "1 running" in sweep_line  # its own count: the other sweep's run is not its own


def test_bench_status_shows_each_runs_preset_and_protocol_and_whole_clauses(tmp_path, capsys):
    """Issue 39.6: runs of two presets in one store could not be told apart, and a note was
    cut inside a clause ("...stopped at step 1; rerun to")."""
    store = RunStore(tmp_path)
    quick = make_config("vanilla", "toy", 20, 0, preset="quick", protocol="clean")
    paper = make_config("vanilla", "toy", 20, 0)
    for config in (quick, paper):
        store.run(config.run_id).plan(config_json(config))
    note = "the worker server died (SIGKILL) during the run; stopped at step 1; rerun to resume"
    store.run(quick.run_id).transition(RunState.RUNNING, attempt=1)
    store.run(quick.run_id).transition(RunState.INTERRUPTED, note=note)
    assert main(["status", "--out", str(tmp_path)]) == 0
    rows = {
        cells[0]: cells
        for line in capsys.readouterr().out.splitlines()
        if (cells := [c.strip() for c in line.strip("|").split("|")])[0]
        in (quick.run_id, paper.run_id)
    }
    assert rows[quick.run_id][1:4] == ["quick", "clean", "interrupted"]
    assert rows[paper.run_id][1:4] == ["paper", "official", "pending"]
    assert (
        rows[quick.run_id][-1]
        == "the worker server died (SIGKILL) during the run; stopped at step 1 ..."
    )
