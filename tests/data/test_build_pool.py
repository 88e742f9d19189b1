"""A data build's pool processes end with the build (issue 48): ``kill -9`` of ``bench data
prepare`` left its joblib workers (about 150 MB each) alive for 16 minutes and more, blocked
writing a result to the dead parent, and their ``/dev/shm`` folders with them."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

BUILD = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path

    from debias_bench.data.family import DatasetFamily
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.datasets.parallel import parallel_chunks

    PIDS = Path(sys.argv[1])


    def slow(i):
        (PIDS / str(os.getpid())).touch()
        time.sleep(300)
        return i


    class SlowPool(DatasetFamily):
        spec = DatasetSpec(
            name="slow_pool", num_classes=2, num_biases=2, ratios=(5.0,), image_size=(4, 4),
            channels=3, backbone="mlp", test_kind="conflicting",
        )

        def prepare(self, ratios=None, force=False):
            return self.build_into(self.folder, force, self.build, dict)

        def build(self, staging):
            list(parallel_chunks(slow, [(0,), (1,)], 2))

        def load(self, ratio):
            raise NotImplementedError


    SlowPool(Path(sys.argv[2]), Path(sys.argv[2])).prepare()
    """
)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in state  # a zombie (nobody reaps it in a container) is gone


def _wait(condition, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def test_the_pool_of_a_killed_build_ends_with_it(tmp_path):
    script, pids = tmp_path / "build.py", tmp_path / "pids"
    script.write_text(BUILD)
    pids.mkdir()
    build = subprocess.Popen([sys.executable, str(script), str(pids), str(tmp_path / "data")])
    workers: list[int] = []
    try:
        assert _wait(lambda: len(list(pids.iterdir())) == 2, 120), "the pool did not start"
        workers = [int(p.name) for p in pids.iterdir()]
        build.send_signal(signal.SIGKILL)
        build.wait()
        ended = _wait(lambda: not any(_alive(pid) for pid in workers), 15)
        assert ended, f"pool processes {workers} outlived the killed build"  # was: 16+ min
    finally:
        for pid in workers:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
