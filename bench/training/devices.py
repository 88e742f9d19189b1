"""The device a run trains on, from its ``--device`` name. Torch is imported when a name is
resolved, not with the module: the launchers import it to build a sweep, and ``bench list
launchers`` or ``bench run --help`` need no torch."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from debias_bench.errors import ConfigError

if TYPE_CHECKING:
    import torch

#: the install line of README.md (CPU wheels; a GPU machine takes PyPI's CUDA build)
INSTALL_TORCH = "pip install torch torchvision --index-url https://download.pytorch.org/whl/cpu"


def load_torch() -> ModuleType:
    """torch, or one ConfigError naming why it cannot be imported and how to install it (a
    sweep resolves its device first, so this is the first thing `bench run` imports torch for;
    ``--dry-run``, ``bench list`` and ``bench config`` need none)."""
    try:
        import torch
    except Exception as exc:  # a broken install raises anything (OSError for a missing .so)
        lines = str(exc).strip().splitlines()
        raise ConfigError(
            f"torch cannot be imported ({type(exc).__name__}: {lines[0] if lines else ''}); "
            "bench trains with it; nothing was started",
            hint=f"install it: `{INSTALL_TORCH}` (CPU wheels, as README.md says; plain "
            "`pip install torch torchvision` for the CUDA build); `bench run --dry-run` lists "
            "the runs without it",
        ) from None
    return torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto``: the GPU when one is visible, else the CPU; ``cuda``, ``cuda:N`` and ``mps``
    refused when that device is not there (before any run is recorded, ``preflight.check_device``:
    a run that fails on it would block the corrected rerun until ``--retry-failed``)."""
    torch = load_torch()
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda"):
        if not torch.cuda.is_available():
            raise ConfigError(
                f"--device {name} requested but no CUDA device is visible",
                hint="use --device cpu (or auto: the GPU when there is one)",
            )
        index = name.partition(":")[2]
        count = torch.cuda.device_count()
        if index and int(index) >= count:
            raise ConfigError(
                f"--device {name}: only {count} GPU(s) visible (cuda:0 to cuda:{count - 1})",
                hint="pick one of those, or --device cuda (CUDA_VISIBLE_DEVICES chooses which)",
            )
    if name == "mps" and not torch.backends.mps.is_available():
        needs = "Apple silicon and macOS 12.3 or later"
        why = needs if torch.backends.mps.is_built() else "this torch is built without it"
        raise ConfigError(
            f"--device mps requested but MPS is not available here ({why})",
            hint="use --device cpu (or auto: the GPU when there is one)",
        )
    return torch.device(name)
