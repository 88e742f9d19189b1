"""``--jobs-per-gpu auto``: how many runs of a sweep share one GPU, from ``bench perf`` data.

Each (dataset, method) cell of the sweep gets the most runs per GPU that both

- **fit in memory**: the GPU's total memory, less :data:`RESERVE_MB` for whatever else lives
  there, over the cell's measured peak (``torch.cuda.max_memory_allocated``) times
  :data:`MEMORY_MARGIN` (what PyTorch's caching allocator holds beyond what it hands out) plus
  :data:`CONTEXT_MB` (each process's CUDA context);
- **raise total steps/s**: a step that takes :data:`BUSY_MS` or longer alone is taken to keep
  the GPU busy (1 run); a shorter one is launch-bound, the GPU idle between its kernels while
  the host launches the next, so ``BUSY_MS // ms_per_step`` runs fill it. Colored MNIST's MLP
  took 2.4 ms a step alone on an H200 and two runs together made 2.2x one's steps/s
  (results/gpu); the bf16 ResNets of the 224-px sets took 11-30 ms and SelecMix 477 ms;

and no more than the host cores per GPU (each run's host thread launches its kernels) nor
:data:`MAX_AUTO`. The sweep takes the smallest of its cells' numbers, since any run may share a
GPU with any other. A cell ``bench perf`` has not measured on a GPU gets 1, and the lines
printed name it with the command that measures it.

The measurements are read from ``bench perf --json FILE`` (its ``summary`` rows: ``peak_mb``,
``ms_per_step``); the local launcher's ``--perf-json`` names the file, by default
``perf.json`` in the sweep's ``--out``. The numbers are the rule's judgement from the
measurements of results/gpu, not a fit: ``scripts/gpu_check.sh pack`` measures packed runs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from debias_bench.errors import ConfigError

#: the word ``--jobs-per-gpu`` takes besides a number
AUTO = "auto"
#: MB of each GPU kept free (other processes, fragmentation)
RESERVE_MB = 2048.0
#: a run's measured peak (max allocated) times this: what the caching allocator reserves
MEMORY_MARGIN = 1.15
#: MB of each process's CUDA context, outside what torch allocates
CONTEXT_MB = 512.0
#: ms: a step this long alone keeps the GPU busy; shorter ones are launch-bound
BUSY_MS = 20.0
#: the most runs per GPU ``auto`` chooses
MAX_AUTO = 16

Cell = tuple[str, str]  # (dataset, method)


@dataclass(frozen=True)
class Gpu:
    """One device of the inventory: its name and total memory."""

    name: str
    total_mb: float


def gpu_inventory(indices: Sequence[int]) -> list[Gpu]:
    """The GPUs of this process at ``indices`` (its own numbering, after
    ``CUDA_VISIBLE_DEVICES``), as ``torch.cuda.get_device_properties`` describes them."""
    import torch

    found = (torch.cuda.get_device_properties(i) for i in indices)
    return [Gpu(p.name, p.total_memory / 2**20) for p in found]


@dataclass(frozen=True)
class CellPerf:
    """What ``bench perf`` measured of one cell on a GPU."""

    peak_mb: float
    ms_per_step: float


@dataclass
class PerfData:
    """The GPU measurements of a ``bench perf --json`` file, by cell; ``why_none``: why the
    file gives none (missing, measured on a CPU, ...)."""

    path: Path
    cells: dict[Cell, CellPerf] = field(default_factory=dict)
    device: str = ""
    why_none: str | None = None


def read_perf(path: Path) -> PerfData:
    """The measured cells of ``bench perf --json`` output at ``path``; a file that is not one
    is a ConfigError, one measured off a GPU gives no cells (and says why)."""
    if not path.is_file():
        return PerfData(path, why_none=f"{path} does not exist")
    try:
        data = json.loads(path.read_text())
        rows = list(data["summary"])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"--perf-json {path}: not the output of `bench perf --json` ({type(exc).__name__})",
            hint="give the file `bench perf --device cuda ... --json FILE` wrote",
        ) from None
    device = str(data.get("device", ""))
    if data.get("device_type") != "cuda":
        why = f"{path} was measured on {device or 'another device'}, not a GPU"
        return PerfData(path, device=device, why_none=why)
    if data.get("mode") == "host_syncs" or data.get("batch_size_override"):
        why = f"{path} counts host syncs or overrides the batch size: no timing of the runs"
        return PerfData(path, device=device, why_none=why)
    cells = {
        (row["dataset"], row["method"]): CellPerf(float(row["peak_mb"]), float(row["ms_per_step"]))
        for row in rows
        if row.get("peak_mb") and row.get("ms_per_step") and not row.get("error")
    }
    return PerfData(path, cells, device)


@dataclass(frozen=True)
class CellJobs:
    """One cell's runs per GPU and what limits them."""

    cell: Cell
    jobs: int
    why: str


def cell_jobs(perf: CellPerf, gpu_mb: float, cores_per_gpu: int) -> tuple[int, str]:
    """The runs per GPU of a cell measured as ``perf`` and what limits them (see the module
    docstring); at least 1."""
    per_run = perf.peak_mb * MEMORY_MARGIN + CONTEXT_MB
    busy = "launch-bound" if perf.ms_per_step < BUSY_MS / 2 else "keeps the GPU busy"
    limits = {
        f"memory: {perf.peak_mb / 1024:.1f} GiB peak x {MEMORY_MARGIN:g} + "
        f"{CONTEXT_MB / 1024:g} GiB context in {gpu_mb / 1024:.0f} GiB": int(
            (gpu_mb - RESERVE_MB) // per_run
        ),
        f"step time: {perf.ms_per_step:.1f} ms alone, {busy}": int(BUSY_MS // perf.ms_per_step),
        f"host cores: {cores_per_gpu} per GPU": cores_per_gpu,
        f"the most auto chooses: {MAX_AUTO}": MAX_AUTO,
    }
    why, jobs = min(limits.items(), key=lambda item: item[1])
    if jobs < 1 and why.startswith("memory"):
        why += "; it may not fit even alone"
    return max(1, jobs), why


@dataclass
class Packing:
    """The runs per GPU ``auto`` chose for a sweep, each cell's own number, and the cells it
    had no measurement of."""

    jobs: int
    cells: list[CellJobs]
    unmeasured: list[Cell]
    perf: PerfData
    gpus: list[Gpu]

    def measure_command(self) -> str:
        """The ``bench perf`` command that measures every cell of the sweep into the file."""
        cells = [c.cell for c in self.cells] + self.unmeasured
        datasets = ",".join(dict.fromkeys(d for d, _ in cells))
        methods = ",".join(dict.fromkeys(m for _, m in cells))
        return (
            f"bench perf --device cuda --datasets {datasets} --methods {methods} --repeats 1 "
            f"--json {self.perf.path}"
        )

    def lines(self) -> list[str]:
        """What the choice was made of, for the sweep's start."""
        smallest = min(self.gpus, key=lambda g: g.total_mb)
        lines = [
            f"--jobs-per-gpu auto: {self.jobs} run(s) per GPU on {len(self.gpus)} x "
            f"{smallest.name} ({smallest.total_mb / 1024:.0f} GiB), the smallest of the "
            "sweep's cells (any run may share a GPU with any other)"
        ]
        if self.cells:
            lines.append(f"  from {self.perf.path} ({self.perf.device}):")
        lines += [f"  {d} {m}: {c.jobs} ({c.why})" for c in self.cells for d, m in [c.cell]]
        if self.unmeasured:
            why = f" ({self.perf.why_none})" if self.perf.why_none else ""
            lines.append(
                "  not measured on a GPU, so 1: "
                + ", ".join(f"{d} {m}" for d, m in self.unmeasured)
                + why
            )
            lines.append(f"  measure them with: {self.measure_command()}")
        gpu_names = {g.name for g in self.gpus}
        if self.cells and not any(name in self.perf.device for name in gpu_names):
            lines.append(
                f"  note: measured on {self.perf.device}, this sweep runs on "
                f"{', '.join(sorted(gpu_names))}: step times and memory may differ there"
            )
        return lines


def choose(cells: Iterable[Cell], perf: PerfData, gpus: list[Gpu], cores: int) -> Packing:
    """Runs per GPU for a sweep of ``cells`` on ``gpus`` (the smallest one's memory counts)
    with ``cores`` host cores, from the measurements ``perf``."""
    if not gpus:
        raise ConfigError(
            "--jobs-per-gpu auto packs runs on GPUs, and this sweep sees none",
            hint="CPU runs use --workers N (each worker gets the cores / N threads)",
        )
    gpu_mb = min(g.total_mb for g in gpus)
    cores_per_gpu = max(1, cores // len(gpus))
    measured, unmeasured = [], []
    for cell in dict.fromkeys(cells):
        found = perf.cells.get(cell)
        if found is None:
            unmeasured.append(cell)
        else:
            jobs, why = cell_jobs(found, gpu_mb, cores_per_gpu)
            measured.append(CellJobs(cell, jobs, why))
    jobs = 1 if unmeasured or not measured else min(c.jobs for c in measured)
    return Packing(jobs, measured, unmeasured, perf, gpus)
