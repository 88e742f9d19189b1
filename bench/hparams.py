"""Hyperparameter declarations: every key a run uses has a type, a default, a range and a doc.

The engine declares its keys here (:data:`ENGINE_HPARAMS`); a method declares its own on its
class (``Method.HPARAMS``), with the same :class:`HParam`. Values from every layer (method YAML,
presets, ``--set``, tuned files) are parsed and checked against these declarations when the grid
is expanded, so a bad value is a one-line error before any run exists, never a crash mid-sweep.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any, Literal

from debias_bench.errors import ConfigError

Kind = Literal["int", "float", "bool", "str", "ints"]

#: a declared default meaning "no default: the method's YAML (or ``--set``) must give it"
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


@dataclass(frozen=True)
class HParam:
    """One hyperparameter: ``kind`` int | float | bool | str | ints (a list of ints).

    ``low``/``high`` bound numbers (``low_open``: strictly above ``low``); ``choices`` (or
    ``choices_of``, called at check time, for registries that grow) limit strings; ``nullable``
    lets ``null`` through. ``late``: declared engine-wide after run ids were first published; at
    its default it is left out of a run's id unless the method's YAML names it (see
    ``RunConfig.identity``), so those ids stay valid.
    """

    name: str
    kind: Kind
    default: Any
    doc: str
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[Any, ...] | None = None
    choices_of: Callable[[], Iterable[str]] | None = None
    nullable: bool = False
    late: bool = False

    def allowed(self) -> tuple[Any, ...] | None:
        if self.choices_of is not None:
            return tuple(self.choices_of())
        return self.choices

    def describe(self) -> str:
        """``float > 0``, ``int >= 1 and <= 10000``, ``int >= 1 or null``, ``one of adam,
        sgd`` ..."""
        allowed = self.allowed()
        if allowed:
            text = f"one of {', '.join(map(str, allowed))}"
        else:
            text = describe_range(self.kind, self.low, self.high, self.low_open)
        return text + (" or null" if self.nullable else "")

    def parse(self, value: Any, where: str) -> Any:
        """``value`` converted to the declared kind; ConfigError naming ``where`` otherwise."""
        if value is None:
            if self.nullable:
                return None
            raise self._bad(value, where)
        try:
            parsed = _convert(self.kind, value)
        except (TypeError, ValueError):
            raise self._bad(value, where) from None
        if self.kind in ("int", "float") and not self._in_range(parsed):
            raise self._bad(value, where)
        if self.kind == "ints" and not all(self._in_range(v) for v in parsed):
            raise self._bad(value, where)
        allowed = self.allowed()
        if allowed and parsed not in allowed:
            raise self._bad(value, where)
        return parsed

    def _in_range(self, number: float) -> bool:
        return in_range(number, self.low, self.high, self.low_open)

    def _bad(self, value: Any, where: str) -> ConfigError:
        return ConfigError(
            f"{where}: {self.name}={value!r} is not valid ({self.name} is {self.describe()})",
            hint=self.doc,
        )


def in_range(number: float, low: float | None, high: float | None, low_open: bool = False) -> bool:
    """Whether ``number`` is finite and within the bounds (``low_open``: strictly above
    ``low``): the one range rule of hyperparameters and of the CLI's numeric flags
    (``debias_bench.commands.common.number``)."""
    if not math.isfinite(number):
        return False
    if low is not None and (number <= low if low_open else number < low):
        return False
    return high is None or number <= high


def describe_range(kind: str, low: float | None, high: float | None, low_open: bool = False) -> str:
    """``int >= 1``, ``float > 0``, ``int >= 1 and <= 10000``: a range as the errors state it."""
    bounds = []
    if low is not None:
        bounds.append(f"{'>' if low_open else '>='} {_bound(low)}")
    if high is not None:
        bounds.append(f"<= {_bound(high)}")
    return " ".join([kind, " and ".join(bounds)]) if bounds else kind


def _bound(number: float) -> str:
    """``10000``, ``4294967295``, ``0.001``: whole bounds in full, others as ``:g``."""
    return str(int(number)) if float(number).is_integer() else f"{number:g}"


def _convert(kind: Kind, value: Any) -> Any:
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false", "yes", "no"):
            return value.lower() in ("true", "yes")
        raise ValueError(value)
    if kind == "str" and isinstance(value, bool):  # YAML reads `--set x=true` as a bool
        return str(value).lower()
    if isinstance(value, bool):  # True is an int in Python, never a number here
        raise ValueError(value)
    if kind == "int":
        number = float(value)
        if not number.is_integer():
            raise ValueError(value)
        return int(number)
    if kind == "float":
        # an int stays an int: run ids hash the JSON of the values, and 1 and 1.0 differ there
        return value if isinstance(value, int | float) else float(value)
    if kind == "str":
        if not isinstance(value, str):
            raise ValueError(value)
        return value
    if not isinstance(value, list | tuple):  # ints
        raise ValueError(value)
    return [_convert("int", v) for v in value]


def _backbones() -> Iterable[str]:
    from debias_bench.backbones import BACKBONES

    return BACKBONES


def _optimizers() -> Iterable[str]:
    from debias_bench.optim import OPTIMIZERS

    return OPTIMIZERS


#: Sane maxima of the lengths and batch sizes: far beyond any published recipe (200 epochs,
#: 50,000 steps, batch 1,024), short of values that are typos (``--epochs 1000000000`` would
#: train for years and fail no check otherwise).
MAX_EPOCHS = 10_000
MAX_STEPS = 100_000_000
MAX_BATCH = 65_536

#: The engine's keys: every method has them. Lengths, cadence, data subsets, backbone, optimiser.
ENGINE_HPARAMS: tuple[HParam, ...] = (
    HParam("batch_size", "int", 256, "training mini-batch size", low=1, high=MAX_BATCH),
    HParam(
        "epochs",
        "int",
        100,
        "training length in epochs (ignored when steps is set)",
        low=1,
        high=MAX_EPOCHS,
    ),
    HParam(
        "steps",
        "int",
        None,
        "training length in steps; overrides epochs",
        low=1,
        high=MAX_STEPS,
        nullable=True,
    ),
    HParam(
        "eval_every",
        "int",
        None,
        "evaluate every N steps (null: eval_every_epochs)",
        low=1,
        nullable=True,
    ),
    HParam("eval_every_epochs", "float", 1, "evaluate every N epochs", low=0, low_open=True),
    HParam("eval_batch_size", "int", 1024, "evaluation batch size", low=1, high=MAX_BATCH),
    HParam(
        "train_limit",
        "int",
        None,
        "train on a seeded subset of this many samples",
        low=1,
        nullable=True,
    ),
    HParam(
        "eval_limit",
        "int",
        None,
        "evaluate on seeded valid/test subsets of this size",
        low=1,
        nullable=True,
    ),
    HParam("input_div255", "bool", False, "divide inputs by 255 again (the official MLPs)"),
    HParam(
        "pretrained_weights",
        "str",
        None,
        "path of ImageNet weights for resnet18_pretrained",
        nullable=True,
    ),
    HParam("track_nc", "bool", False, "Neural Collapse metrics at every evaluation"),
    HParam("nc_limit", "int", 10000, "training samples used for the NC metrics", low=1),
    HParam(
        "image_size",
        "int",
        None,
        "resize every split to this side (ResNets only)",
        low=1,
        nullable=True,
        late=True,
    ),
    HParam(
        "num_threads", "int", None, "pin the run's CPU threads", low=1, nullable=True, late=True
    ),
    HParam("amp", "str", "none", "mixed precision", choices=("none", "bf16", "auto"), late=True),
    HParam(
        "channels_last",
        "str",
        "auto",
        "NHWC weights (speed only)",
        choices=("auto", "true", "false"),
    ),
    HParam("compile", "bool", False, "torch.compile the method's modules (speed only)"),
    HParam("backbone", "str", REQUIRED, "network (default: the dataset's)", choices_of=_backbones),
    HParam(
        "mlp_hidden",
        "ints",
        None,
        "hidden sizes of the mlp backbone (null: 100-100-100)",
        low=1,
        nullable=True,
        late=True,
    ),
    HParam("optimizer", "str", "adam", "optimiser", choices_of=_optimizers, late=True),
    HParam("lr", "float", 1.0e-3, "learning rate", low=0, low_open=True, late=True),
    HParam("weight_decay", "float", 0.0, "L2 weight decay", low=0, late=True),
    HParam("momentum", "float", 0.9, "SGD momentum", low=0, high=1, late=True),
    HParam(
        "lr_step_epochs",
        "float",
        None,
        "StepLR period in epochs (null: constant lr)",
        low=0,
        low_open=True,
        nullable=True,
        late=True,
    ),
    HParam("lr_gamma", "float", 1.0, "StepLR factor per period", low=0, low_open=True, late=True),
)

#: Settings that change speed, not the math: recorded in config.json, never hashed.
SPEED_KEYS = frozenset({"channels_last", "compile"})


def declared(extra: Iterable[HParam] = ()) -> dict[str, HParam]:
    """The engine's declarations with ``extra`` (a method's) added; a method may redeclare an
    engine key to narrow it, never change its kind."""
    table = {p.name: p for p in ENGINE_HPARAMS}
    for param in extra:
        base = table.get(param.name)
        if base is not None and base.kind != param.kind:
            raise ConfigError(
                f"hyperparameter {param.name!r} is declared {param.kind} by the method but "
                f"{base.kind} by the engine"
            )
        table[param.name] = param
    return table


def unknown_key(key: str, table: dict[str, HParam], where: str) -> ConfigError:
    close = difflib.get_close_matches(key, list(table), n=1)
    return ConfigError(
        f"{where}: no hyperparameter {key!r}",
        hint=(f"did you mean {close[0]!r}? " if close else "")
        + "`bench config METHOD DATASET` lists every key with its value and source",
    )
