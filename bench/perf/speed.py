"""Training speed and peak memory of the harness against a bare PyTorch loop (``bench perf``).

Cells
    A *cell* is a (dataset, method) pair, or (dataset, :data:`BARE`) for the bare loop. Each
    cell runs in a process of its own, so its peak memory is its own: on CUDA
    ``torch.cuda.max_memory_allocated``, on the CPU the process's peak RSS, which includes what
    Python and torch hold before training. The process is forked from the launchers' warm
    worker server (torch already imported: a cell of a few steps takes under a second instead
    of 7-13 s), or, with ``BENCH_WORKER_START=cold``, a fresh interpreter
    (``python -m debias_bench.perf.cells CELL_JSON``, which prints one JSON line). Every cell sets
    the same thread count (``--threads``) before it starts.

Data
    Synthetic in-memory tensors shaped like the dataset (its ``DatasetSpec``: image size,
    channels, classes, biases, normalisation, crop and flip): uint8 ``N x H x W x C`` noise with
    random labels and bias labels, ``N = min(4096, 8 x batch size)``; nothing is downloaded.

Harness cells
    ``train_run`` with the paper preset's configuration of the method (its backbone, batch size,
    optimiser) and three changes: ``steps = warmup + steps``; evaluation only after the last
    step; and each hyperparameter's declared ``timing`` value, where it has one (LfF+BE's
    committee, a preparation stage outside the timed window, is one member trained 2 steps;
    DisEnt's feature swap, its steady state, is on from the start). BAR's ImageNet-pretrained
    ResNet-18 is replaced by the same network from scratch (weights do not change the speed and
    need no download).

Bare cells
    Vanilla written by hand: the same model and optimiser builders and batch size, the same
    uint8 tensors, its own few lines of data path (epoch permutation, index, to device,
    random crop + flip on the stored uint8 ``N x H x W x C``, permute, float, normalise; not the
    engine's ``crop_flip_nhwc``, so a slow harness data path would show in the ratio) and
    ``cross_entropy``, ``zero_grad``, ``backward``, ``step``. Official-protocol MLPs divide
    their input by 255 a second time; that happens inside the shared model (``MLP.forward``),
    so both loops do it. The model sees the memory layout the harness gives it, an NCHW view
    of channels-last memory: on a CPU a contiguous NCHW input makes ResNet-20 about 13 %
    slower, which would hide harness overhead rather than measure it.

Timing
    :class:`StepTimer` (a ``Progress``) reads the clock after step ``warmup`` and after step
    ``warmup + steps`` (after ``torch.cuda.synchronize`` on CUDA), or later until the window has
    lasted ``min_time_s`` (a 10 ms step timed 20 times is mostly noise), so model construction,
    preparation stages and evaluation are outside the window, and everything the engine does
    per step (batch building, augmentation, the method's update, loss bookkeeping) is inside.
    With a time budget (``--budget``) the warmup ends once it has taken a quarter of the budget
    and the timed window once it has taken the whole budget (at least one step each): a method
    that needs a minute per step on a CPU (SelecMix's auxiliary ResNet-18) is timed over fewer
    steps, and the number of steps timed is reported.

Cost model
    The paper grid's time from the measured ms/step: ``debias_bench.perf.projection``.

Modules
    This one measures a cell: the run config of its timing run (:func:`cell_overrides`,
    :func:`cell_config`) and its two measurements (:func:`measure_harness`,
    :func:`measure_bare`). What a cell and its measurement are, and their summaries:
    ``debias_bench.perf.measurement``; the timer and peak memory: ``debias_bench.perf.timer``;
    the synthetic data: ``debias_bench.perf.synthetic``; the bare loop:
    ``debias_bench.perf.bare``; a cell in a process of its own: ``debias_bench.perf.cells``.
    The names of those first four modules are importable from here too.
"""

from __future__ import annotations

import contextlib
import tempfile
from pathlib import Path
from typing import Any

import torch

from debias_bench.config.hparams import MAX_STEPS, timing_values
from debias_bench.config.run_config import RunConfig, RunRequest, method_hparams, resolve_layers
from debias_bench.errors import Interrupted
from debias_bench.methods.common import make_classifier
from debias_bench.paths import DataPlace
from debias_bench.perf.bare import bare_loop, crop_flip
from debias_bench.perf.host_syncs import SyncCounter
from debias_bench.perf.measurement import BARE, Cell, Measurement, describe_device, median_ms
from debias_bench.perf.synthetic import SyntheticFamily, synthetic_split, train_size_for
from debias_bench.perf.timer import StepTimer, peak_memory
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.optim import make_optimizer

__all__ = [
    "BARE",
    "Cell",
    "Measurement",
    "StepTimer",
    "SyntheticFamily",
    "bare_loop",
    "cell_config",
    "cell_overrides",
    "crop_flip",
    "describe_device",
    "measure_bare",
    "measure_harness",
    "median_ms",
    "peak_memory",
    "synthetic_split",
    "train_size_for",
]


# --------------------------------------------------------------------------- configuration


def cell_overrides(method: str, cell: Cell) -> dict[str, Any]:
    """The ``--set`` overrides that turn the paper configuration into a timing run."""
    known = resolve_layers(RunRequest(method, cell.dataset, protocol=cell.protocol)).values
    # with a minimum time the timer, not the step count, ends the run (Interrupted): the
    # longest run the declarations allow, evaluated never (eval_every one past it)
    total = cell.warmup + cell.steps if cell.min_time_s <= 0 else MAX_STEPS - 1
    overrides: dict[str, Any] = {"steps": total, "eval_every": total + 1}
    overrides.update(timing_values(method_hparams(method).values()))
    if known["backbone"] == "resnet18_pretrained":
        overrides["backbone"] = "resnet18"  # same network; its weights do not change the speed
    if cell.batch_size:
        overrides["batch_size"] = cell.batch_size
    overrides.update(dict(cell.sets))
    return overrides


def cell_config(method: str, cell: Cell) -> RunConfig:
    """The run config of a harness cell (``method``: the cell's, or vanilla for the bare loop,
    whose hyperparameters it borrows)."""
    ratio = DATASETS.get(cell.dataset).spec.ratios[0]
    overrides = cell_overrides(method, cell)
    return RunRequest(
        method, cell.dataset, ratio, 0, protocol=cell.protocol, overrides=overrides
    ).config()


# --------------------------------------------------------------------------- the two measurements


def measure_harness(cell: Cell, device: torch.device) -> Measurement:
    """Train ``cell.method`` through ``train_run`` on synthetic data and time its steps."""
    config = cell_config(cell.method, cell)
    hp = config.params  # the run's own: train_run reads the same object
    spec = DATASETS.get(cell.dataset).spec
    found = Measurement(cell.dataset, cell.method, hp.backbone, hp.batch_size)
    reason = METHODS.get(cell.method).skip(spec, config.hparams)
    if reason:
        found.error = f"skipped: {reason}"
        return found
    family = SyntheticFamily.of(spec, train_size_for(hp.batch_size))
    data = (family, family.load(config.ratio))
    counter = SyncCounter(device, cell.sync_debug) if cell.host_syncs else None
    timer = StepTimer(cell.warmup, cell.steps, device, cell.budget_s, cell.min_time_s, counter)
    with tempfile.TemporaryDirectory(prefix="bench-perf-") as tmp:
        run_dir = RunStore(Path(tmp)).run(config.run_id)
        place = DataPlace(Path(tmp), Path(tmp))
        with contextlib.suppress(Interrupted), counter or contextlib.nullcontext():
            if counter is not None:
                counter.active = False  # until the timer opens the window
            train_run(config, run_dir, place, device, timer, lambda _: timer.done, data)
    found.warmup_steps = timer.warmup_steps
    found.timed_steps, found.seconds = timer.timed()
    if counter is not None:
        found.host_syncs, found.host_sync_sites = counter.total, counter.top_sites()
        found.host_sync_note = METHODS.get(cell.method).host_sync_note
    return found


def measure_bare(cell: Cell, device: torch.device) -> Measurement:
    """Vanilla's training by hand (same model, optimiser, batch size and tensors)."""
    hp = cell_config("vanilla", cell).params
    spec = DATASETS.get(cell.dataset).spec
    batch_size = hp.batch_size
    train = synthetic_split(spec, train_size_for(batch_size), 0, "train")
    torch.manual_seed(0)
    model = make_classifier(spec, hp, device)
    optimizer = make_optimizer(model.parameters(), hp)
    timer = StepTimer(cell.warmup, cell.steps, device, cell.budget_s, cell.min_time_s)
    bare_loop(model, optimizer, train, spec, batch_size, timer)
    found = Measurement(cell.dataset, BARE, hp.backbone, batch_size, timer.warmup_steps)
    found.timed_steps, found.seconds = timer.timed()
    return found
