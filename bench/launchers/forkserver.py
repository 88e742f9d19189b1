"""Warm worker processes: each run forked from a server that has already imported torch.

A cold worker (``python -m debias_bench.launchers.worker``) pays the interpreter start, the
torch, torchvision and ``torch._dynamo`` imports and the plugins again for every run, several
seconds that dominate short runs. Here a ``multiprocessing`` fork server, started once per
``bench`` process, imports all of that once (:mod:`.preload`) and forks one child per run.

Each run is still a process of its own, with its own pid, exit status (``-signal`` when killed),
peak-memory accounting, environment (``CUDA_VISIBLE_DEVICES`` and thread counts are set in the
child before anything uses them), stdout/stderr logs, timeout and signals; a crash or ``kill -9``
of one run stops no other. The server is a separate, freshly started interpreter (not a fork of
the ``bench`` process, which may have threads, thread pools or CUDA already): it only imports.
When the ``bench`` process dies the server exits, and its runs are told to checkpoint and stop
(``PR_SET_PDEATHSIG`` and a parent watch, as for cold workers).
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from multiprocessing import forkserver, spawn
from multiprocessing.context import BaseContext
from multiprocessing.process import BaseProcess
from typing import Any

#: ``BENCH_WORKER_START=cold`` starts every worker as a fresh interpreter (the old way)
START_ENV = "BENCH_WORKER_START"
#: the module the server imports before its first fork
PRELOAD_MODULE = "debias_bench.launchers.preload"
#: the plugin modules (comma-separated) it imports too
WARM_PLUGINS_ENV = "BENCH_WARM_PLUGINS"


def available() -> bool:
    """Whether this platform can fork warm workers (and the user did not ask for cold ones)."""
    if os.environ.get(START_ENV, "warm").lower() == "cold":
        return False
    return "forkserver" in multiprocessing.get_all_start_methods()


@contextlib.contextmanager
def _env(name: str, value: str) -> Iterator[None]:
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = before


def warm_context(plugins: Iterable[str] = ()) -> BaseContext:
    """The fork server's context, its server started (once per process) with ``plugins``
    preloaded; returns at once, the server imports in the background until the first fork."""
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([PRELOAD_MODULE])
    with _env(WARM_PLUGINS_ENV, ",".join(plugins)):
        forkserver.ensure_running()
    return ctx


_START_LOCK = threading.Lock()


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """``multiprocessing`` re-runs the parent's ``__main__`` (script, notebook, ``-m`` module)
    in every child it starts that way; a run needs nothing from it, and a script without a
    ``__name__`` guard would run again in every worker. Leave it out of what the child is told."""
    real = spawn.get_preparation_data

    def without_main(name: str) -> dict[str, Any]:
        data = real(name)
        data.pop("init_main_from_path", None)
        data.pop("init_main_from_name", None)
        return data

    with _START_LOCK:
        spawn.get_preparation_data = without_main
        try:
            yield
        finally:
            spawn.get_preparation_data = real


def fork_warm(
    target: Callable[..., Any], args: tuple, name: str, plugins: Iterable[str]
) -> BaseProcess:
    """Start ``target(*args)`` in a child of the warm server; returns the started process."""
    context: Any = warm_context(
        plugins
    )  # a ForkServerContext (typeshed's BaseContext lacks Process)
    process: BaseProcess = context.Process(target=target, args=args, name=name)
    with _without_main():
        process.start()
    return process
