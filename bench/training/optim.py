"""Optimisers and learning-rate schedules from hyperparameters.

Schedules are stepped once per training step; a period given in epochs is converted with the
run's steps per epoch, so ``lr_step_epochs: 10, lr_gamma: 1.01`` is exactly ETF-Debias's
``StepLR(step_size=10, gamma=1.01)`` stepped once per epoch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import torch
from torch.optim.lr_scheduler import LRScheduler, StepLR

from debias_bench.config.hparams import EngineParams
from debias_bench.errors import ConfigError


@dataclass(frozen=True)
class OptimizerSettings:
    """What an optimiser is built from: the run's keys (:meth:`of`), or a method's own (SelecMix's
    auxiliary model: ``proj_optimizer``, ``proj_lr``, ...)."""

    name: str
    lr: float
    weight_decay: float = 0.0
    momentum: float = 0.9  # SGD only

    @classmethod
    def of(cls, hp: EngineParams) -> OptimizerSettings:
        """The run's optimiser (``optimizer``, ``lr``, ``weight_decay``, ``momentum``)."""
        return cls(hp.optimizer, hp.lr, hp.weight_decay, hp.momentum)


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    settings: OptimizerSettings | EngineParams,
) -> torch.optim.Optimizer:
    """Adam, AdamW or SGD (``settings``, or the run's optimiser of its params)."""
    if not isinstance(settings, OptimizerSettings):
        settings = OptimizerSettings.of(settings)
    name, lr, wd = settings.name.lower(), float(settings.lr), float(settings.weight_decay)
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    if name == "sgd":
        momentum = float(settings.momentum)
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)
    raise ConfigError(f"unknown optimizer {name!r}; valid: adam, adamw, sgd")


def make_scheduler(
    optimizer: torch.optim.Optimizer, hp: EngineParams, steps_per_epoch: int
) -> LRScheduler | None:
    """StepLR every ``lr_step_epochs`` epochs by ``lr_gamma`` (None when absent or gamma 1)."""
    period, gamma = hp.lr_step_epochs, float(hp.lr_gamma)
    if not period or gamma == 1.0:
        return None
    return StepLR(optimizer, step_size=max(1, round(float(period) * steps_per_epoch)), gamma=gamma)
