"""A stop request honoured between the steps of a method's preparation stage.

A method's ``prepare`` runs training loops of its own (LfF+BE's committee, JTT's and PGD's
biased models, DeNetDM's stage 1, DFR's ERM model), which the engine's loop cannot poll. While a
stage runs, every optimiser step first asks whether the run should stop, through a global
optimiser hook of PyTorch, so a stop ends the stage before its next update rather than after the
whole stage (minutes at paper length). Nothing of a stage is checkpointed before it ends: the
rerun runs it again from its start, with the same numbers (a stage is a function of the seed).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from torch.optim.optimizer import register_optimizer_step_pre_hook


class StageStopped(Exception):
    """Raised before an optimiser step of a preparation stage when the run was asked to stop."""


@contextlib.contextmanager
def stop_between_steps(should_stop: Callable[[], bool]) -> Iterator[None]:
    """Within the block, raise :class:`StageStopped` before any optimiser's step once
    ``should_stop()`` is true (every optimiser of the process: the block is the stage)."""

    def check(_optimizer: Any, _args: Any, _kwargs: Any) -> None:
        if should_stop():
            raise StageStopped

    handle = register_optimizer_step_pre_hook(check)
    try:
        yield
    finally:
        handle.remove()
