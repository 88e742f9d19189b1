"""The process pool of a data build: chunks in parallel, and no pool process left behind.

joblib keeps its worker processes for 300 s after their last task, for reuse. A process ending
through ``os._exit`` (a warm worker, forked by :mod:`debias_bench.launchers.forkserver`) waits
for its child processes first, so a run that had prepared its dataset held its launcher slot
for five minutes after it finished (the committed regression check stalled 4.5 minutes on each
of Dogs & Cats and BAR). The pool is shut down as soon as a build's chunks are done.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from joblib import Parallel, delayed
from joblib.externals.loky import get_reusable_executor

T = TypeVar("T")


def parallel_chunks(
    function: Callable[..., T], chunks: Sequence[tuple[Any, ...]], n_jobs: int
) -> Iterator[T]:
    """``function(*chunk)`` for each chunk, in order, on ``n_jobs`` processes (in this process
    when that is 1 or there is a single chunk); the pool ends when the last result is out."""
    if n_jobs == 1 or len(chunks) <= 1:  # no worker start-up for small work
        yield from (function(*chunk) for chunk in chunks)
        return
    try:
        yield from Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(function)(*chunk) for chunk in chunks
        )
    finally:
        # joblib's pool is the reusable loky executor: asking for one with other settings
        # shuts the current one down (its processes joined); the new one starts no process
        get_reusable_executor().shutdown(wait=True)
