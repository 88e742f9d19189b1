"""The device a run trains on, from its ``--device`` name. Torch is imported when a name is
resolved, not with the module: the launchers import it to build a sweep, and ``bench list
launchers`` or ``bench run --help`` need no torch."""

from __future__ import annotations

from typing import TYPE_CHECKING

from debias_bench.errors import ConfigError

if TYPE_CHECKING:
    import torch


def resolve_device(name: str = "auto") -> torch.device:
    """``auto``: the GPU when one is visible, else the CPU; ``cuda`` refused when none is."""
    import torch  # here, not at the top: see the module docstring

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(
            "--device cuda requested but no CUDA device is visible", hint="use --device cpu"
        )
    return torch.device(name)
