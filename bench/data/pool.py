"""The process pool of a data build ends with the process that started it.

A build decodes images on joblib's loky pool (``datasets/parallel.py``). When the building
process was killed (``kill -9`` of ``bench data prepare``, an OOM kill, a Slurm job ended),
its pool processes (about 150 MB each) stayed alive: each holds both ends of the pipe its
results go through, so a worker blocked writing a result to the dead parent never saw the
pipe close and waited for ever (measured: 16 minutes and more), and the resource tracker they
keep open never removed the pool's ``/dev/shm`` folders and semaphores. :func:`pool_ends_with_us`
gives each worker a thread that ends it (``os._exit``) within ``every_s`` seconds of its
parent's death (its parent pid changes: it was re-parented); the tracker then sees its last
user go and removes what the pool left in ``/dev/shm``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Iterator


def _exit_with(parent: int, every_s: float) -> None:
    """A pool worker's initializer: end this process once ``parent`` is no longer its parent."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(every_s)
        os._exit(1)

    threading.Thread(target=watch, name="exit-with-parent", daemon=True).start()


@contextlib.contextmanager
def pool_ends_with_us(every_s: float = 1.0) -> Iterator[None]:
    """Within the block, joblib's loky workers started by this thread end when this process
    dies (checked every ``every_s`` seconds: one ``getppid`` call)."""
    from joblib import parallel_config  # only when building: a dataset registers without it

    with parallel_config(backend="loky", initializer=_exit_with, initargs=(os.getpid(), every_s)):
        yield
