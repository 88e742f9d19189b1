"""Optimisers and learning-rate schedules from hyperparameters.

Schedules are stepped once per training step; a period given in epochs is converted with the
run's steps per epoch, so ``lr_step_epochs: 10, lr_gamma: 1.01`` is exactly ETF-Debias's
``StepLR(step_size=10, gamma=1.01)`` stepped once per epoch.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import torch
from torch.optim.lr_scheduler import LRScheduler, StepLR

from debias_bench.errors import ConfigError

#: the optimisers ``optimizer`` (and a method's ``<prefix>optimizer``) may name
OPTIMIZERS = ("adam", "adamw", "sgd")


def make_optimizer(
    params: Iterable[torch.nn.Parameter], hp: Mapping[str, Any], prefix: str = ""
) -> torch.optim.Optimizer:
    """``{prefix}optimizer`` in adam / adamw / sgd with ``{prefix}lr``, ``{prefix}weight_decay``."""
    name = str(hp.get(prefix + "optimizer", "adam")).lower()
    lr = float(hp[prefix + "lr"])
    wd = float(hp.get(prefix + "weight_decay", 0.0))
    if name == "adam":
        return torch.optim.Adam(params, lr=lr, weight_decay=wd)
    if name == "adamw":
        return torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    if name == "sgd":
        momentum = float(hp.get(prefix + "momentum", 0.9))
        return torch.optim.SGD(params, lr=lr, momentum=momentum, weight_decay=wd)
    raise ConfigError(f"unknown optimizer {name!r}; valid: adam, adamw, sgd")


def make_scheduler(
    optimizer: torch.optim.Optimizer, hp: Mapping[str, Any], steps_per_epoch: int
) -> LRScheduler | None:
    """StepLR every ``lr_step_epochs`` epochs by ``lr_gamma`` (None when absent or gamma 1)."""
    period = hp.get("lr_step_epochs")
    gamma = float(hp.get("lr_gamma", 1.0))
    if not period or gamma == 1.0:
        return None
    return StepLR(optimizer, step_size=max(1, round(float(period) * steps_per_epoch)), gamma=gamma)
