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
        """The attributes a checkpoint holds: everything with a ``state_dict`` (modules,
        optimisers, schedulers, the pieces of ``methods/state.py``), plain tensors and random
        generators. Tensors or generators inside a list, tuple or dict would be silently lost
        on resume: such an attribute is an error that names it."""
        out = {}
        for name, value in vars(self).items():
            if name in _NOT_STATE:
                continue
            if callable(getattr(value, "state_dict", None)) or isinstance(value, _RAW_STATE):
                out[name] = value
            elif isinstance(value, list | tuple | dict) and _holds_state(value):
                raise ConfigError(
                    f"method {type(self).__name__}: attribute {name!r} holds tensors, modules "
                    "or generators inside a container, which a checkpoint would not restore",
                    hint="use an nn.ModuleList/ModuleDict, one attribute per tensor, or an "
                    "object with state_dict()/load_state_dict() (see methods/state.py)",
                )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {name: _state_of(obj) for name, obj in self._stateful().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stateful = self._stateful()
        missing = set(stateful) - set(state)
        if missing:
            raise ValueError(f"checkpoint lacks state for {sorted(missing)}")
        for name, obj in stateful.items():
            if isinstance(obj, torch.Tensor):
                with torch.no_grad():
                    obj.copy_(state[name])
            elif isinstance(obj, torch.Generator):
                obj.set_state(state[name])
            else:
                obj.load_state_dict(state[name])


#: attributes of every method that are configuration, not state
_NOT_STATE = frozenset({"spec", "hp", "env", "device"})
#: state without a ``state_dict``: saved as such (a copy) and restored in place
_RAW_STATE = (torch.Tensor, torch.Generator)


def _state_of(obj: Any) -> Any:
    if isinstance(obj, torch.Tensor):
        return obj.detach().clone()
    if isinstance(obj, torch.Generator):
        return obj.get_state()
    return obj.state_dict()


def _holds_state(container: Any) -> bool:
    items = container.values() if isinstance(container, dict) else container
    return any(
        isinstance(item, (*_RAW_STATE, nn.Module, torch.optim.Optimizer))
        or (isinstance(item, list | tuple | dict) and _holds_state(item))
        for item in items
    )
