"""Speed settings of a run: mixed precision, channels-last weights, ``torch.compile``.

* ``amp``: ``none`` | ``bf16`` | ``auto``. ``bf16`` runs every training step's forward pass
  and the evaluation under ``torch.autocast(dtype=bfloat16)`` (backward and optimiser steps
  stay in float32; bf16 needs no loss scaling). ``auto`` is bf16 on a CUDA device that
  supports it and none elsewhere (a CPU without bf16 units runs it slower than float32).
  It changes the numbers slightly, so it is part of a run's identity.
* ``channels_last``: ``auto`` | ``true`` | ``false``. Convolution weights in NHWC (the
  batches already arrive NHWC-strided from the uint8 store). ``auto``: on CUDA only.
* ``compile``: ``torch.compile`` every module of the method in place (state-dict keys
  unchanged, so checkpoints stay portable). Off by default: compilation costs tens of seconds
  per run, worth it for long runs on a GPU.

``channels_last`` and ``compile`` leave the math as it is; they are recorded in the config but
not hashed into the run id (see ``debias_bench.config.run_config.SPEED_KEYS``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

import torch

from debias_bench.config.amp_policy import bf16_cells
from debias_bench.errors import ConfigError

AMP_CHOICES = ("none", "bf16", "auto")


def amp_dtype(
    setting: Any, device: torch.device, cell: tuple[str, str] | None = None
) -> torch.dtype | None:
    """The autocast dtype ``amp`` asks for on ``device`` (None: full precision). ``auto``:
    bf16 on a GPU that supports it, for a (dataset, method) ``cell`` whose accuracy bf16 was
    measured to keep (:func:`~debias_bench.config.amp_policy.bf16_cells`); else none."""
    name = "none" if setting in (None, False) else str(setting).lower()
    if name not in AMP_CHOICES:
        raise ConfigError(f"amp must be one of {', '.join(AMP_CHOICES)}, not {setting!r}")
    if name == "auto":
        cuda = device.type == "cuda" and torch.cuda.is_available()
        measured = cell is not None and cell in bf16_cells()
        name = "bf16" if cuda and measured and torch.cuda.is_bf16_supported() else "none"
    return torch.bfloat16 if name == "bf16" else None


@contextlib.contextmanager
def autocast(dtype: torch.dtype | None, device: torch.device) -> Iterator[None]:
    """Autocast to ``dtype`` (from :func:`amp_dtype`, resolved once per run, not per step); a
    no-op for None."""
    if dtype is None:
        yield
        return
    with torch.autocast(device.type, dtype=dtype):
        yield


def full_precision(device: torch.device) -> contextlib.AbstractContextManager:
    """Leave any autocast region (for backward passes and optimiser steps)."""
    if torch.is_autocast_enabled(device.type):
        return torch.autocast(device.type, enabled=False)
    return contextlib.nullcontext()


def _on(setting: Any, device: torch.device) -> bool:
    if isinstance(setting, str):
        if setting.lower() == "auto":
            return device.type == "cuda"
        return setting.lower() == "true"
    return bool(setting)


def accelerate(
    modules: Iterator[torch.nn.Module], hp: Mapping[str, Any], device: torch.device
) -> None:
    """Apply ``channels_last`` and ``compile`` to a method's modules, in place.

    ``compile`` compiles each module's direct children (a classifier's backbone and head), so
    that methods which call ``model.features(x)`` or ``model.head(z)`` run compiled code too."""
    channels_last = _on(hp.get("channels_last"), device)
    compile_ = _on(hp.get("compile"), device)
    for module in modules:
        if channels_last:
            module.to(memory_format=torch.channels_last)
        if compile_:
            for part in list(module.children()) or [module]:
                part.compile()
