"""Workers that start on an unbuilt dataset wait for one build instead of racing on it."""

from __future__ import annotations

import threading
import time
from typing import ClassVar

from support.toy import ToyFamily

from debias_bench.data.folder_swap import build_lock


class SlowBuild(ToyFamily):
    """Records when each prepare starts and ends."""

    spans: ClassVar[list[tuple[float, float]]] = []

    def prepare(self, ratios=None):
        start = time.monotonic()
        time.sleep(0.3)
        self.spans.append((start, time.monotonic()))
        return self.data_root


def test_two_builders_of_one_family_take_turns(tmp_path, capfd):
    def build() -> None:
        family = SlowBuild(tmp_path / "raw", tmp_path / "data")
        with build_lock(family):
            family.prepare()

    threads = [threading.Thread(target=build) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    first, second = sorted(SlowBuild.spans)
    assert second[0] >= first[1]  # never at the same time
    assert "waiting for another process preparing toy" in capfd.readouterr().err
    assert (tmp_path / "data" / "toy" / ".build.lock").is_file()
