"""Running one perf cell in a process of its own, so that its peak memory is its own: forked
from the warm worker server where there is one, else a fresh interpreter
(``python -m debias_bench.perf.cells CELL_JSON`` prints one JSON line); a failure, a timeout or
a kill comes back as the cell's ``error``. What a cell measures: :mod:`debias_bench.perf.speed`.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

import torch

from debias_bench.launchers import forkserver
from debias_bench.perf.measurement import BARE, Cell, Measurement
from debias_bench.perf.speed import measure_bare, measure_harness
from debias_bench.perf.timer import peak_memory
from debias_bench.plugins.loading import import_plugins
from debias_bench.registry import DATASETS, METHODS
from debias_bench.training.engine import pinned_threads


def _import_models() -> None:
    """Import every method, dataset and torchvision's models now, so that ``start_mb`` (the
    memory before data and models are built) counts the code."""
    import torchvision.models  # noqa: F401

    METHODS.names()
    DATASETS.names()


def run_cell(cell: Cell) -> Measurement:
    """Measure ``cell`` in this process (``run_cell_subprocess`` isolates its memory)."""
    import_plugins(cell.plugins, cell.sys_path)
    _import_models()
    device = torch.device(cell.device)
    if device.type == "cuda":
        # a fresh process has no CUDA context yet, and resetting the memory statistics before
        # one exists fails ("Invalid device argument"): seen on an H200, every cell
        torch.cuda.init()
        torch.cuda.set_device(device)
        torch.cuda.reset_peak_memory_stats(device)
    start_mb = peak_memory(device)[0]
    measure = measure_bare if cell.method == BARE else measure_harness
    with pinned_threads(cell.threads):
        found = measure(cell, device)
    found.peak_mb, found.memory = peak_memory(device)
    found.start_mb = start_mb
    return found


def run_cell_isolated(cell: Cell, timeout_s: float | None = None) -> Measurement:
    """Measure ``cell`` in a process of its own, so that its peak memory is its own: forked
    from the warm worker server where the platform has one (``BENCH_WORKER_START``), which has
    already imported Python's and torch's modules (on a GPU machine a fresh interpreter spent
    about 7 s of each cell's 11-20 s importing), else a fresh interpreter."""
    if forkserver.available():
        return run_cell_warm(cell, timeout_s)
    return run_cell_subprocess(cell, timeout_s)


def run_cell_warm(cell: Cell, timeout_s: float | None = None) -> Measurement:
    """Measure ``cell`` in a child of the warm worker server; a failure comes back as
    ``error``, as from :func:`run_cell_subprocess`."""
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        result, log = Path(tmp) / "measurement.json", Path(tmp) / "stderr.txt"
        name = f"perf {cell.dataset} {cell.method}"
        child = forkserver.fork_warm(
            _warm_child, (cell.to_json(), str(result), str(log)), name, cell.plugins
        )
        try:
            child.join(timeout_s)
            timed_out = child.is_alive()
        finally:  # a timeout, or Ctrl-C / SIGTERM in the parent: the cell stops too
            if child.is_alive():
                child.kill()
                child.join()
        if timed_out:
            return Measurement(cell.dataset, cell.method, error=_timed_out(timeout_s or 0))
        measured = result.read_text() if result.is_file() else ""
        return _outcome(cell, measured, child.exitcode or 0, log.read_text())


def _warm_child(cell_json: str, result: str, log: str) -> None:
    """The warm child's body: the cell's stderr to ``log``, its measurement to ``result``."""
    with open(log, "w") as err, contextlib.redirect_stderr(err), contextlib.redirect_stdout(err):
        found = _measure(Cell.from_json(cell_json))
    Path(result).write_text(json.dumps(found.to_dict()))


def _timed_out(timeout_s: float) -> str:
    return f"timed out after {timeout_s:g} s (--cell-timeout)"


def run_cell_subprocess(cell: Cell, timeout_s: float | None = None) -> Measurement:
    """Measure ``cell`` in a fresh Python process; a failure comes back as ``error``."""
    command = [sys.executable, "-m", "debias_bench.perf.cells", cell.to_json()]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return Measurement(cell.dataset, cell.method, error=_timed_out(timeout_s or 0))
    last_line = (done.stdout.strip().splitlines() or [""])[-1]
    return _outcome(cell, last_line, done.returncode, done.stderr)


def _outcome(cell: Cell, measured: str, exit_code: int, stderr: str) -> Measurement:
    """What a cell's finished process left: its measurement (JSON), else the signal that
    killed it (the OOM killer, or by hand), else the last line of its stderr."""
    if measured:
        try:
            return Measurement.from_dict(json.loads(measured))
        except (json.JSONDecodeError, TypeError):
            pass
    if exit_code < 0:
        return Measurement(cell.dataset, cell.method, error=f"killed by signal {-exit_code}")
    tail = (stderr.strip().splitlines() or [f"exit code {exit_code}"])[-1]
    return Measurement(cell.dataset, cell.method, error=tail)


def main(argv: list[str] | None = None) -> int:
    """Child entry point: measure the cell given as JSON, print the measurement as JSON."""
    args = sys.argv[1:] if argv is None else argv
    found = _measure(Cell.from_json(args[0] if args else sys.stdin.read()))
    print(json.dumps(found.to_dict()), flush=True)
    return 1 if found.error and not found.error.startswith("skipped") else 0


def _measure(cell: Cell) -> Measurement:
    """:func:`run_cell`, an exception coming back as the cell's error (its traceback printed)."""
    try:
        return run_cell(cell)
    except Exception as exc:  # reported to the parent as the cell's error
        traceback.print_exc()
        return Measurement(cell.dataset, cell.method, error=f"{type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(main())
