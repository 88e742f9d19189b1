"""The method interface that every debiasing method implements.

The engine owns the loop, evaluation, selection, checkpoints and resume; a method only says
how one training step updates its models and how it predicts. Everything stateful it keeps as
an attribute with a ``state_dict`` (modules, optimisers, schedulers, per-sample buffers) is
saved and restored automatically.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import nn

from debias_bench.acceleration import full_precision
from debias_bench.data import Batch, DatasetSpec, Splits
from debias_bench.errors import ConfigError
from debias_bench.hparams import HParam
from debias_bench.optim import make_optimizer, make_scheduler


class HParams(dict):
    """Resolved hyperparameters. Every declared key is resolved before a run starts, so a
    missing key is one the method reads without declaring it: a bug in the method."""

    def __missing__(self, key: str) -> Any:
        raise ConfigError(
            f"the method reads hyperparameter {key!r}, which it does not declare",
            hint=f"add HParam({key!r}, ...) to the method class's HPARAMS",
        )


@dataclass(frozen=True)
class TrainEnv:
    """Facts of the run a method may need at construction time."""

    device: torch.device
    train_size: int
    steps_per_epoch: int
    total_steps: int
    seed: int


class Method(ABC):
    """Base class: subclasses set up their models in ``__init__`` and implement the rest."""

    #: set by the registry decorator's caller for messages; informative only
    name: ClassVar[str] = ""
    #: the method's own hyperparameters (the engine's are in ``debias_bench.hparams``); values
    #: per dataset, ratio, protocol and preset go in the YAML beside the module
    HPARAMS: ClassVar[tuple[HParam, ...]] = ()

    def __init__(self, spec: DatasetSpec, hp: Mapping[str, Any], env: TrainEnv) -> None:
        self.spec = spec
        self.hp = HParams(hp)
        self.env = env
        self.device = env.device

    # ----------------------------------------------------------------- interface
    @classmethod
    def skip(cls, spec: DatasetSpec, hp: Mapping[str, Any]) -> str | None:
        """Reason this method cannot run on ``spec`` (None: it can)."""
        return None

    def prepare(self, data: Splits) -> None:  # noqa: B027  (optional hook, no-op by default)
        """Optional stage before training (e.g. LfF+BE's bias committee); its time counts."""

    @abstractmethod
    def update(self, batch: Batch) -> Mapping[str, torch.Tensor | float]:
        """One training step on ``batch``; returns scalars to log."""

    @abstractmethod
    def predict(self, x: torch.Tensor) -> torch.Tensor:
        """Logits of the debiased model."""

    @abstractmethod
    def features(self, x: torch.Tensor) -> torch.Tensor:
        """Penultimate features of the debiased model (for the Neural Collapse analysis)."""

    def backbone_module(self) -> nn.Module | None:
        """The backbone whose features ``classifier_weight`` reads (for class activation maps);
        None when there is no single one."""
        return None

    def classifier_weight(self) -> torch.Tensor | None:
        """The ``K x d`` weights that read ``features`` (NC2/NC3); None when there is no
        single linear head over them."""
        return None

    # ----------------------------------------------------------------- shared pieces
    def optimizer_for(self, *modules: nn.Module, prefix: str = "") -> torch.optim.Optimizer:
        params = [p for m in modules for p in m.parameters() if p.requires_grad]
        return make_optimizer(params, self.hp, prefix)

    def scheduler_for(self, optimizer: torch.optim.Optimizer) -> Any:
        return make_scheduler(optimizer, self.hp, self.env.steps_per_epoch)

    @staticmethod
    def step(loss: torch.Tensor, *pairs: tuple[torch.optim.Optimizer, Any]) -> None:
        """Backward once, then step each (optimizer, scheduler-or-None) pair (in full
        precision when the forward pass ran under autocast)."""
        with full_precision(loss.device):
            for optimizer, _ in pairs:
                optimizer.zero_grad(set_to_none=True)
            loss.backward()
            for optimizer, scheduler in pairs:
                optimizer.step()
                if scheduler is not None:
                    scheduler.step()

    def modules(self) -> Iterator[nn.Module]:
        return (v for v in vars(self).values() if isinstance(v, nn.Module))

    def train_mode(self) -> None:
        for module in self.modules():
            module.train()

    def eval_mode(self) -> None:
        for module in self.modules():
            module.eval()

    def _stateful(self) -> dict[str, Any]:
        skip = {"spec", "hp", "env", "device"}
        return {
            k: v
            for k, v in vars(self).items()
            if k not in skip and callable(getattr(v, "state_dict", None))
        }

    def state_dict(self) -> dict[str, Any]:
        return {name: obj.state_dict() for name, obj in self._stateful().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stateful = self._stateful()
        missing = set(stateful) - set(state)
        if missing:
            raise ValueError(f"checkpoint lacks state for {sorted(missing)}")
        for name, obj in stateful.items():
            obj.load_state_dict(state[name])
