"""The method interface that every debiasing method implements.

The engine owns the loop, evaluation, selection, checkpoints and resume; a method only says
how one training step updates its models and how it predicts. Everything stateful it keeps as
an attribute with a ``state_dict`` (modules, optimisers, schedulers, per-sample buffers), a
tensor or a random generator is saved and restored automatically; state it would lose (tensors
inside a list, an object without ``state_dict`` holding tensors) is refused before training
starts (:meth:`Method.checkpointed`).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import nn

from debias_bench.config.hparams import EngineParams, declarations
from debias_bench.config.run_config import RunConfig
from debias_bench.data.contract import Batch, Splits
from debias_bench.data.spec import DatasetSpec
from debias_bench.errors import ConfigError
from debias_bench.training.acceleration import full_precision
from debias_bench.training.optim import OptimizerSettings, make_optimizer, make_scheduler
from debias_bench.training.sampling import UNIFORM, Sampler


@dataclass(frozen=True)
class TrainEnv:
    """Facts of the run a method may need at construction time (``config`` and ``store``, the
    run's configuration and the run store it trains in, are None outside a stored run)."""

    device: torch.device
    train_size: int
    steps_per_epoch: int
    total_steps: int
    seed: int
    config: RunConfig | None = None
    store: Path | None = None


class Method(ABC):
    """Base class: subclasses set up their models in ``__init__`` and implement the rest.

    A method's hyperparameters are the fields of its params class (``Params``, a frozen
    dataclass extending :class:`~debias_bench.config.hparams.EngineParams` or its parent method's);
    ``self.hp`` holds the run's resolved values as an instance of it (the run's own
    ``RunConfig.params``, built once), so declare ``hp`` with the same class for typed reads::

        @dataclass(frozen=True)
        class LfFParams(EngineParams):
            q: float = hparam(REQUIRED, "GCE exponent of the biased model", low=0, high=1)

        class LfF(Method):
            Params = LfFParams
            hp: LfFParams

    Values per dataset, ratio, protocol and preset go in the YAML beside the module.
    """

    #: set by the registry decorator's caller for messages; informative only
    name: ClassVar[str] = ""
    #: host synchronisations the method makes outside its training step, where its official
    #: algorithm has them (a stage run once before training): ``bench perf --host-syncs`` shows it
    host_sync_note: ClassVar[str] = ""
    #: the method's params class: the engine's keys and the method's own
    Params: ClassVar[type[EngineParams]] = EngineParams
    hp: EngineParams

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if "HPARAMS" in vars(cls):  # the former form, removed: its keys would go unread
            raise TypeError(
                f"{cls.__name__}.HPARAMS: declare the method's hyperparameters as a Params "
                "dataclass extending EngineParams, one hparam(...) field each (docs: Adding a "
                "method)"
            )
        if not (isinstance(cls.Params, type) and issubclass(cls.Params, EngineParams)):
            raise TypeError(
                f"{cls.__name__}.Params must extend debias_bench.config.hparams.EngineParams"
            )
        declarations(cls.Params)  # each field declared with hparam(), of a known kind

    def __init__(
        self, spec: DatasetSpec, hp: EngineParams | Mapping[str, Any], env: TrainEnv
    ) -> None:
        """``hp``: the run's typed params (kept as they are), or resolved values
        (``RunConfig.hparams``: typed params are built from them)."""
        self.spec = spec
        self.hp = type(self).Params.of(hp)
        self.env = env
        self.device = env.device

    # ----------------------------------------------------------------- interface
    @classmethod
    def skip(cls, spec: DatasetSpec, hp: Mapping[str, Any]) -> str | None:
        """Reason this method cannot run on ``spec`` with the resolved values ``hp``
        (``RunConfig.hparams``; None: it can)."""
        return None

    def prepare(self, data: Splits) -> None:  # noqa: B027  (optional hook, no-op by default)
        """Optional stage before training (e.g. LfF+BE's bias committee); its time counts."""

    def evaluation_splits(self, data: Splits) -> Splits:
        """The splits the engine evaluates and selects on, asked once right after construction:
        ``data`` unless a method keeps part of one for itself (DFR re-trains its last layer on
        half of the validation split: the selection rules read only the other half)."""
        return data

    def run_length(self, steps: int) -> int:
        """The updates the engine makes after :meth:`prepare`: the run's ``steps`` unless a
        method does all its training in :meth:`prepare` (DFR: 1)."""
        return steps

    def record(self) -> dict[str, Any]:
        """Facts of this run a method reports in ``result.json`` (``method_record``; e.g. that
        DFR reused a Vanilla run's model); saved with the checkpoint by the method itself."""
        return {}

    def batch_sampler(self) -> Sampler:
        """How the engine draws this method's training batches: :data:`UNIFORM` (every sample
        once per epoch, in a fresh order) unless a method returns another sampler of
        ``debias_bench.training.sampling`` (group-balanced, weighted). The engine asks once,
        before :meth:`prepare`; a weighted sampler's weights, set in :meth:`prepare`, are saved
        with the checkpoint when the sampler is an attribute of the method."""
        return UNIFORM

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
    def optimizer_for(
        self, *modules: nn.Module, settings: OptimizerSettings | None = None
    ) -> torch.optim.Optimizer:
        """An optimiser over the trainable parameters of ``modules``: the run's (``optimizer``,
        ``lr``, ``weight_decay``, ``momentum``) unless ``settings`` says otherwise."""
        params = [p for m in modules for p in m.parameters() if p.requires_grad]
        return make_optimizer(params, settings or OptimizerSettings.of(self.hp))

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

    def checkpointed(self) -> dict[str, Any]:
        """The attributes a checkpoint holds: everything with a ``state_dict`` (modules,
        optimisers, schedulers, the pieces of ``methods/state.py``), plain tensors and random
        generators. State anywhere else (inside a list, tuple, dict or set, or inside an object
        without ``state_dict``) would be silently lost on resume: such an attribute is an error
        that names it. The engine calls this right after constructing the method, so a method
        that keeps such state is refused before it trains, and again at every checkpoint."""
        out = {}
        for name, value in vars(self).items():
            if name in _NOT_STATE:
                continue
            if callable(getattr(value, "state_dict", None)) or isinstance(value, _RAW_STATE):
                out[name] = value
            elif _holds_state(value):
                raise ConfigError(
                    f"method {type(self).__name__}: attribute {name!r} holds tensors, modules, "
                    "optimisers or generators that a checkpoint would not save",
                    hint="use an nn.ModuleList/ModuleDict, one attribute per tensor, or an "
                    "object with state_dict()/load_state_dict() (see methods/state.py)",
                )
        return out

    def state_dict(self) -> dict[str, Any]:
        return {name: _state_of(obj) for name, obj in self.checkpointed().items()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        stateful = self.checkpointed()
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


def _holds_state(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` (not itself checkpointed) holds tensors, modules, optimisers or
    generators, looking into containers and into plain objects' attributes (a few levels)."""
    if isinstance(value, (*_RAW_STATE, nn.Module, torch.optim.Optimizer)):
        return True
    if depth > 3 or isinstance(value, str | bytes | int | float | torch.device | type):
        return False
    if callable(getattr(value, "state_dict", None)):
        return depth > 0  # a checkpointable object inside a container is still lost
    if isinstance(value, dict):
        items: Any = value.values()
    elif isinstance(value, list | tuple | set | frozenset):
        items = value
    else:
        items = getattr(value, "__dict__", {}).values()
    return any(_holds_state(item, depth + 1) for item in items)
