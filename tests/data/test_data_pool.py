"""The process pool of a data build ends with the build (datasets/parallel.py)."""

from __future__ import annotations

import multiprocessing
import time

from debias_bench.datasets.parallel import parallel_chunks


def test_results_come_in_chunk_order_in_and_out_of_process():
    chunks = [(2, k) for k in range(6)]
    assert list(parallel_chunks(pow, chunks, n_jobs=1)) == [2**k for k in range(6)]
    assert list(parallel_chunks(pow, chunks, n_jobs=2)) == [2**k for k in range(6)]
    assert list(parallel_chunks(pow, [], n_jobs=2)) == []


def _build_then_return() -> None:
    # long enough tasks that the pool's processes are up and idle when the build ends
    assert list(parallel_chunks(time.sleep, [(0.3,)] * 6, n_jobs=2)) == [None] * 6


def test_a_forked_worker_that_built_data_exits_with_its_run():
    """A warm worker is a forked child: its exit waits for its child processes. joblib's
    pool would keep them for 300 s after the build, holding the worker's launcher slot."""
    process = multiprocessing.get_context("forkserver").Process(target=_build_then_return)
    process.start()
    process.join(timeout=90)  # not a speed target: the pool's own idle timeout is 300 s
    alive = process.is_alive()
    if alive:
        process.kill()
    assert not alive, "the worker outlived its data build by the pool's idle timeout"
    assert process.exitcode == 0
