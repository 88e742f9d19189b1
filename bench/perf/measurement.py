"""What a perf cell is and what it measured: :class:`Cell`, one measurement (a method, or the
bare PyTorch loop :data:`BARE`, on a dataset's synthetic tensors), :class:`Measurement`, its
steps, seconds and peak memory (or the error that stopped it), and their summaries (the median
ms/step, the device in words). How a cell is measured: :mod:`debias_bench.perf.speed`.
"""

from __future__ import annotations

import json
import math
import platform
import statistics
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import torch

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
    budget_s: float | None = None  # per phase (see perf.speed's docstring); None: no limit
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
