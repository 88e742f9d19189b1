"""Training speed and peak memory of the harness against a bare PyTorch loop (``bench perf``).

Cells
    A *cell* is a (dataset, method) pair, or (dataset, :data:`BARE`) for the bare loop. Each
    cell runs in a process of its own, so its peak memory is its own: on CUDA
    ``torch.cuda.max_memory_allocated``, on the CPU the process's peak RSS, which includes what
    Python and torch hold before training. The process is forked from the launchers' warm
    worker server (torch already imported: a cell of a few steps takes under a second instead
    of 7-13 s), or, with ``BENCH_WORKER_START=cold``, a fresh interpreter
    (``python -m debias_bench.perf.speed CELL_JSON``, which prints one JSON line). Every cell sets
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
"""

from __future__ import annotations

import contextlib
import json
import math
import platform
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

from debias_bench.config.hparams import MAX_STEPS, timing_values
from debias_bench.config.run_config import RunConfig, RunRequest, method_hparams, resolve_layers
from debias_bench.data.contract import Split, Splits
from debias_bench.data.family import DatasetFamily
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import Interrupted
from debias_bench.methods.common import make_classifier
from debias_bench.paths import DataPlace
from debias_bench.perf.host_syncs import SyncCounter
from debias_bench.registry import DATASETS, METHODS
from debias_bench.runs.progress import Progress
from debias_bench.runs.store import RunStore
from debias_bench.training.engine import train_run
from debias_bench.training.optim import make_optimizer

#: the method name of the bare PyTorch loop's cells
BARE = "bare"


@dataclass(frozen=True)
class Cell:
    """One measurement: a method (or :data:`BARE`) on a dataset's synthetic tensors."""

    dataset: str
    method: str
    steps: int = 20
    warmup: int = 5
    protocol: str = "official"
    device: str = "cpu"
    batch_size: int | None = None  # None: the paper configuration's
    threads: int | None = None  # None: torch's default
    budget_s: float | None = None  # per phase (see the module docstring); None: no limit
    min_time_s: float = 0.0  # the timed window lasts at least this long (fast cells)
    plugins: tuple[str, ...] = ()  # modules registering the method/dataset (tests, plugins)
    sys_path: tuple[str, ...] = ()
    host_syncs: bool = False  # count host synchronisations in the window (``host_syncs``)
    sync_debug: bool = False  # on CUDA: the window also under set_sync_debug_mode("error")
    sets: tuple[tuple[str, Any], ...] = ()  # ``--set`` overrides of every cell (amp=bf16)

    def to_json(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, text: str) -> Cell:
        data = json.loads(text)
        for key in ("plugins", "sys_path"):
            data[key] = tuple(data.get(key, ()))
        data["sets"] = tuple(tuple(pair) for pair in data.get("sets", ()))
        return cls(**data)


@dataclass
class Measurement:
    """What a cell measured (or the error that stopped it)."""

    dataset: str
    method: str
    backbone: str = ""
    batch_size: int = 0
    warmup_steps: int = 0
    timed_steps: int = 0
    seconds: float = 0.0
    peak_mb: float = 0.0
    start_mb: float = 0.0  # the same quantity before data and models were built
    memory: str = ""  # what peak_mb is: "peak RSS" or "CUDA max allocated"
    error: str | None = None  # "skipped: ..." when the method cannot run on the dataset
    host_syncs: int | None = None  # counted in the timed window (Cell.host_syncs), else None
    host_sync_sites: dict[str, int] | None = None  # the most frequent: "op at file:line" -> n
    host_sync_note: str = ""  # the method's own words on syncs outside its step

    @property
    def ms_per_step(self) -> float:
        return 1000.0 * self.seconds / self.timed_steps if self.timed_steps else math.nan

    @property
    def steps_per_s(self) -> float:
        return self.timed_steps / self.seconds if self.seconds else math.nan

    @property
    def host_syncs_per_step(self) -> float | None:
        if self.host_syncs is None or not self.timed_steps:
            return None
        return self.host_syncs / self.timed_steps

    def to_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "ms_per_step": self.ms_per_step,
            "steps_per_s": self.steps_per_s,
            "host_syncs_per_step": self.host_syncs_per_step,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Measurement:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


# --------------------------------------------------------------------------- timing


class StepTimer(Progress):
    """Clock reads at the two ends of the timed window; ``done`` tells the loop to stop.

    The window runs from the end of step ``warmup`` to the end of step ``warmup + steps``, or on
    until it has lasted ``min_time_s``. With ``budget_s``, the warmup ends once it has taken a
    quarter of the budget and the window once it has taken the whole budget (at least one step
    each); a first step that alone took the whole budget is timed itself (beside it, one-time
    costs are negligible) and ends the cell.
    """

    def __init__(
        self,
        warmup: int,
        steps: int,
        device: torch.device,
        budget_s: float | None = None,
        min_time_s: float = 0.0,
        counter: SyncCounter | None = None,
    ) -> None:
        self.warmup, self.steps, self.device, self.budget_s = warmup, steps, device, budget_s
        self.min_time_s, self.counter = min_time_s, counter
        self.began, self.total = 0.0, math.inf
        self.window: list[tuple[int, float]] = []  # (step, time) at the two ends

    def start(self, run_id: str = "", total_steps: int = 0, start_step: int = 0) -> None:
        """A run shorter than the warmup (DFR trains in its preparation stage and then makes
        one update) is timed over its last step."""
        self.began = time.perf_counter()
        self.total = total_steps or math.inf
        if total_steps:
            self.warmup = min(self.warmup, total_steps - 1)
        if self.warmup == 0:
            self._mark(0)

    def _over(self, since: float, fraction: float) -> bool:
        return self.budget_s is not None and time.perf_counter() - since >= fraction * self.budget_s

    def _mark(self, step: int) -> None:
        if self.counter is not None:  # the window's own synchronisation is not counted
            self.counter.active = False
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.window.append((step, time.perf_counter()))
        if self.counter is not None:  # counts inside the window only
            self.counter.active = not self.done

    def advance(self, step: int) -> None:
        if not self.window:
            counting = self.counter is not None  # counts need a step inside the window
            if step == 1 and self.warmup > 0 and self._over(self.began, 1.0) and not counting:
                self.window.append((0, self.began))  # one slow step: time it, stop
                self._mark(step)
            elif step >= self.warmup or self._over(self.began, 0.25):
                self._mark(step)
        elif len(self.window) == 1:
            first_step, first_time = self.window[0]
            long_enough = time.perf_counter() - first_time >= self.min_time_s
            enough = step - first_step >= self.steps and long_enough
            if enough or self._over(first_time, 1.0) or step >= self.total:
                self._mark(step)

    @property
    def done(self) -> bool:
        return len(self.window) == 2

    @property
    def warmup_steps(self) -> int:
        return self.window[0][0] if self.window else 0

    def timed(self) -> tuple[int, float]:
        """(steps, seconds) of the timed window."""
        (a_step, a_time), (b_step, b_time) = self.window
        return b_step - a_step, b_time - a_time


def peak_memory(device: torch.device) -> tuple[float, str]:
    """(MB, what it is) of this process: CUDA max allocated, or the CPU's peak RSS."""
    if device.type == "cuda":
        return torch.cuda.max_memory_allocated(device) / 2**20, "CUDA max allocated"
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux, bytes on macOS
    return rss / (2**20 if sys.platform == "darwin" else 2**10), "peak RSS"


# --------------------------------------------------------------------------- synthetic data


def synthetic_split(spec: DatasetSpec, n: int, seed: int, name: str) -> Split:
    """``n`` uint8 noise images of ``spec``'s shape with random labels and bias labels."""
    g = torch.Generator().manual_seed(seed)
    h, w = spec.image_size
    images = torch.randint(0, 256, (n, h, w, spec.channels), dtype=torch.uint8, generator=g)
    labels = torch.randint(0, spec.num_classes, (n,), generator=g)
    biases = torch.randint(0, spec.num_biases, (n,), generator=g)
    return Split(images, labels, biases, name=name)


class SyntheticFamily(DatasetFamily):
    """A dataset family serving synthetic splits of another family's spec (no files); made
    with :meth:`of`, one subclass per spec (a family's spec is a class attribute)."""

    def __init__(self, train_size: int, eval_size: int = 256) -> None:
        super().__init__(Path("."), Path("."))
        self.train_size, self.eval_size = train_size, eval_size

    @classmethod
    def of(cls, spec: DatasetSpec, train_size: int, eval_size: int = 256) -> SyntheticFamily:
        """A family standing in for the one whose spec is ``spec``."""
        return type(f"Synthetic_{spec.name}", (cls,), {"spec": spec})(train_size, eval_size)

    def prepare(self, ratios: Iterable[float] | None = None, force: bool = False) -> Path:
        return self.data_root

    def load(self, ratio: float) -> Splits:
        return Splits(
            train=synthetic_split(self.spec, self.train_size, 0, "train"),
            valid=synthetic_split(self.spec, self.eval_size, 1, "valid"),
            test=synthetic_split(self.spec, self.eval_size, 2, "test"),
        )

    def version(self) -> str:
        return f"synthetic-{self.spec.name}"


def train_size_for(batch_size: int) -> int:
    """Synthetic training-set size: a few batches per epoch, at most 4096 images."""
    return min(4096, 8 * batch_size)


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


# --------------------------------------------------------------------------- the two loops


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


def crop_flip(x: torch.Tensor, padding: int, flip: bool) -> torch.Tensor:
    """RandomCrop(padding) + horizontal flip of ``N x H x W x C``, one draw per sample."""
    n, h, w, _ = x.shape
    dev = x.device
    if padding:
        padded = F.pad(x, (0, 0, padding, padding, padding, padding))
        oy = torch.randint(0, 2 * padding + 1, (n, 1, 1), device=dev)
        ox = torch.randint(0, 2 * padding + 1, (n, 1, 1), device=dev)
        rows = oy + torch.arange(h, device=dev).view(1, h, 1)
        cols = ox + torch.arange(w, device=dev).view(1, 1, w)
        x = padded[torch.arange(n, device=dev).view(n, 1, 1), rows, cols]
    if flip:
        x = torch.where(torch.rand(n, 1, 1, 1, device=dev) < 0.5, x.flip(2), x)
    return x


def bare_loop(
    model: torch.nn.Module,
    optimizer: torch.optim.Optimizer,
    train: Split,
    spec: DatasetSpec,
    batch_size: int,
    timer: StepTimer,
) -> torch.Tensor:
    """Train until ``timer`` is done, reshuffling each epoch; returns the last loss."""
    device = next(model.parameters()).device
    mean = std = None
    if spec.mean is not None and spec.std is not None:
        mean = torch.tensor(spec.mean, device=device).view(1, -1, 1, 1)
        std = torch.tensor(spec.std, device=device).view(1, -1, 1, 1)
    model.train()
    timer.start()
    step, loss = 0, torch.tensor(math.nan)
    while not timer.done:
        for rows in torch.randperm(len(train)).split(batch_size):
            x = train.images[rows].to(device, non_blocking=True)
            if spec.crop_padding or spec.hflip:
                x = crop_flip(x, spec.crop_padding, spec.hflip)
            x = x.permute(0, 3, 1, 2).float().div_(255.0)  # NCHW view of NHWC memory
            if mean is not None and std is not None:
                x = x.sub_(mean).div_(std)
            y = train.labels[rows].to(device, non_blocking=True)
            loss = F.cross_entropy(model(x), y)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            optimizer.step()
            step += 1
            timer.advance(step)
            if timer.done:
                break
    return loss.detach()


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


# --------------------------------------------------------------------------- summaries


def median_ms(measurements: Iterable[Measurement]) -> float | None:
    """Median ms/step of the successful measurements (None when there is none)."""
    values = [m.ms_per_step for m in measurements if not m.error and m.timed_steps]
    return statistics.median(values) if values else None


def describe_device(device: torch.device, threads: int | None = None) -> str:
    """The device in words: the GPU's name, or the CPU model and thread count."""
    if device.type == "cuda":
        return f"CUDA {torch.cuda.get_device_name(device)}"
    model = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    threads = threads or torch.get_num_threads()
    return f"CPU {model}, {threads} thread{'' if threads == 1 else 's'}"
