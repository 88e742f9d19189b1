"""Hyperparameter declarations: every key a run uses has a type, a default, a range and a doc.

A key is declared once, as a field of a frozen dataclass: the engine's keys are the fields of
:class:`EngineParams`; a method's params class extends it (or its parent method's) with its own
fields, each made by :func:`hparam`. The field's name is the key, its annotation the kind (``int``,
``float``, ``bool``, ``str``, ``tuple[int, ...]``; ``| None`` lets ``null`` through), and
:func:`hparam` carries the rest (default, doc, range, choices, the value a timing run uses).
:func:`declarations` turns a params class into :class:`~debias_bench.config.hparam_parsing.HParam`
records (each parses and checks a value of its key), which the resolution
(``debias_bench.config.run_config``) uses to parse and check the values of every layer (method YAML,
presets, ``--set``, tuned files) when the grid is expanded, so a bad value is a one-line error
before any run exists, never a crash mid-sweep. A method reads the resolved values as typed
attributes of its params (``self.hp.lr``), which mypy checks.

A declaration also says how ``bench tune`` searches the key (``search=``, see
:mod:`debias_bench.config.search`) and whether it is a step count that keeps its share of the run
when
a preset shortens it (``run_share=True``, see :mod:`debias_bench.config.run_length`; DisEnt's swap
start). A method's YAML gives the per-dataset values, and per-preset ones only where a stage
should not follow the run's length (LfF+BE's committee).
"""

from __future__ import annotations

import dataclasses
import difflib
import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Self, Union, get_args, get_origin, get_type_hints

from debias_bench.config.hparam_parsing import NO_TIMING, HParam, Kind
from debias_bench.config.hparam_parsing import describe_range as describe_range  # re-export
from debias_bench.config.hparam_parsing import in_range as in_range  # re-export
from debias_bench.config.search import Around, LogUniform, SearchSpace
from debias_bench.errors import ConfigError
from debias_bench.registry import BACKBONES, OPTIMIZERS

#: a declared default meaning "no default: the method's YAML (or ``--set``) must give it"
REQUIRED: Any = type("Required", (), {"__repr__": lambda self: "REQUIRED"})()


def _backbones() -> Iterable[str]:
    return BACKBONES.names()


def _optimizers() -> Iterable[str]:
    return OPTIMIZERS.names()


#: Sane maxima of the lengths and batch sizes: far beyond any published recipe (200 epochs,
#: 50,000 steps, batch 1,024), short of values that are typos (``--epochs 1000000000`` would
#: train for years and fail no check otherwise).
MAX_EPOCHS = 10_000
MAX_STEPS = 100_000_000
MAX_BATCH = 65_536
#: The most any float hyperparameter may be unless it declares its own ``high``: far beyond any
#: recipe's rate, weight or temperature (the largest are loss weights of 100), and far short of
#: float32's 3.4e38, where ``--set lr=1e308`` crashed the optimiser with an overflow instead of
#: being refused (a huge but finite rate still fails the run by name: ``diverged``).
MAX_FLOAT = 1e6
#: The most CPU threads one run or worker may be given: ``--set num_threads``, the local
#: launcher's ``--threads`` and ``OMP_NUM_THREADS`` (:func:`debias_bench.config.bounds.
#: check_thread_env`) share this bound.
MAX_THREADS = 1024


def hparam(
    default: Any,
    doc: str,
    *,
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
    choices: tuple[Any, ...] | None = None,
    choices_of: Callable[[], Iterable[str]] | None = None,
    late: bool = False,
    timing: Any = NO_TIMING,
    search: SearchSpace | None = None,
    run_share: bool = False,
) -> Any:
    """A hyperparameter declared as a field of a params class (:class:`HParam` says what each
    argument means; the name, kind and nullability come from the field)."""
    partial = HParam(
        "",
        "str",
        default,
        doc,
        low,
        high,
        low_open,
        choices,
        choices_of,
        late=late,
        timing=timing,
        search=search,
        run_share=run_share,
    )
    return field(default=default, metadata={_DECLARATION: partial})


_DECLARATION = "debias_bench.hparam"
#: field annotation -> declared kind (``X | None`` adds ``nullable``)
_KIND_OF_TYPE: dict[Any, Kind] = {
    int: "int",
    float: "float",
    bool: "bool",
    str: "str",
    tuple[int, ...]: "ints",
}


@dataclass(frozen=True)
class EngineParams:
    """The engine's keys (every method has them): lengths, cadence, data subsets, backbone,
    optimiser. A method's params class extends it with :func:`hparam` fields; values are read as
    attributes (``hp.lr``), and :meth:`as_dict` gives them as a dict.

    A ``float`` key may hold an int at run time (``lr: 1`` stays 1: run ids hash the values as
    given, and 1 and 1.0 differ there); arithmetic is the same."""

    batch_size: int = hparam(256, "training mini-batch size", low=1, high=MAX_BATCH)
    epochs: int = hparam(
        100, "training length in epochs (ignored when steps is set)", low=1, high=MAX_EPOCHS
    )
    steps: int | None = hparam(
        None, "training length in steps; overrides epochs", low=1, high=MAX_STEPS
    )
    eval_every: int | None = hparam(None, "evaluate every N steps (null: eval_every_epochs)", low=1)
    eval_every_epochs: float = hparam(
        1, "evaluate every N epochs", low=0, low_open=True, high=MAX_EPOCHS
    )
    eval_batch_size: int = hparam(1024, "evaluation batch size", low=1, high=MAX_BATCH)
    train_limit: int | None = hparam(None, "train on a seeded subset of this many samples", low=1)
    eval_limit: int | None = hparam(
        None, "evaluate on seeded valid/test subsets of this size", low=1
    )
    valid_limit: int | None = hparam(
        None,
        "bound the valid subset to this size instead (null: as eval_limit)",
        low=1,
        late=True,
    )
    input_div255: bool = hparam(False, "divide inputs by 255 again (the official MLPs)")
    pretrained_weights: str | None = hparam(
        None, "path of ImageNet weights for resnet18_pretrained / resnet50_pretrained"
    )
    track_nc: bool = hparam(False, "Neural Collapse metrics at every evaluation")
    nc_limit: int = hparam(10000, "training samples used for the NC metrics", low=1)
    image_size: int | None = hparam(
        None, "resize every split to this side (ResNets only)", low=1, late=True
    )
    num_threads: int | None = hparam(
        None, "pin the run's CPU threads", low=1, high=MAX_THREADS, late=True
    )
    amp: str = hparam("none", "mixed precision", choices=("none", "bf16", "auto"), late=True)
    channels_last: str = hparam(
        "auto", "NHWC weights (speed only)", choices=("auto", "true", "false")
    )
    compile: bool = hparam(False, "torch.compile the method's modules (speed only)")
    backbone: str = hparam(REQUIRED, "network (default: the dataset's)", choices_of=_backbones)
    mlp_hidden: tuple[int, ...] | None = hparam(
        None, "hidden sizes of the mlp backbone (null: 100-100-100)", low=1, late=True
    )
    optimizer: str = hparam("adam", "optimiser", choices_of=_optimizers, late=True)
    # tuned a decade either side of each recipe's rate, at most 3e-2 (Adam diverges beyond)
    lr: float = hparam(
        1.0e-3, "learning rate", low=0, low_open=True, late=True, search=Around(10, cap=3e-2)
    )
    weight_decay: float = hparam(
        0.0, "L2 weight decay", low=0, late=True, search=LogUniform(1e-6, 1e-3)
    )
    momentum: float = hparam(0.9, "SGD momentum", low=0, high=1, late=True)
    lr_step_epochs: float | None = hparam(
        None,
        "StepLR period in epochs (null: constant lr)",
        low=0,
        low_open=True,
        high=MAX_EPOCHS,
        late=True,
    )
    lr_gamma: float = hparam(1.0, "StepLR factor per period", low=0, low_open=True, late=True)

    @classmethod
    def of(cls, values: EngineParams | Mapping[str, Any]) -> Self:
        """Typed params from resolved values (``RunConfig.hparams``), or params of another
        class: keys the class does not declare are left out, keys missing take their declared
        default, and a missing key without one is an error (resolution gives every key). Params
        that already are of this class are returned as they are (a run builds its own once:
        ``RunConfig.params``)."""
        if isinstance(values, cls):
            return values
        if isinstance(values, EngineParams):
            values = values.as_dict()
        given: dict[str, Any] = {}
        for declared_field in dataclasses.fields(cls):
            name = declared_field.name
            value = values.get(name, declared_field.default)
            if value is REQUIRED:
                raise ConfigError(
                    f"{cls.__name__}: no value for hyperparameter {name!r}",
                    hint="resolve the values with debias_bench.config.run_config.RunRequest "
                    "(resolve_layers, or .config()), which gives every declared key",
                )
            given[name] = tuple(value) if isinstance(value, list) else value
        return cls(**given)

    def as_dict(self) -> dict[str, Any]:
        """Every key with its value (``ints`` keys as tuples), in declaration order."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


#: names a hyperparameter may not take: the params classes' own methods
_RESERVED = frozenset({"of", "as_dict"})


#: each params class's declarations, made once (a class is a fixed set of fields)
_DECLARATIONS: dict[type[EngineParams], tuple[HParam, ...]] = {}


def declarations(params: type[EngineParams]) -> tuple[HParam, ...]:
    """Every key of a params class as an :class:`HParam`, in field order (the engine's first)."""
    if params not in _DECLARATIONS:
        _DECLARATIONS[params] = _declare(params)
    return _DECLARATIONS[params]


def _declare(params: type[EngineParams]) -> tuple[HParam, ...]:
    hints = get_type_hints(params)
    out = []
    for declared_field in dataclasses.fields(params):
        name = declared_field.name
        partial = declared_field.metadata.get(_DECLARATION)
        if partial is None:
            raise TypeError(
                f"{params.__name__}.{name} is not declared with hparam() "
                "(from debias_bench import hparam)"
            )
        if name in _RESERVED:
            raise TypeError(f"{params.__name__}.{name}: the name is taken by a params method")
        kind, nullable = _kind(hints[name], f"{params.__name__}.{name}")
        high = MAX_FLOAT if kind == "float" and partial.high is None else partial.high
        out.append(dataclasses.replace(partial, name=name, kind=kind, nullable=nullable, high=high))
    return tuple(out)


def _kind(annotation: Any, where: str) -> tuple[Kind, bool]:
    """The declared kind of a field annotation, and whether it admits None."""
    args = get_args(annotation)
    nullable = get_origin(annotation) in (Union, types.UnionType) and type(None) in args
    if nullable:
        rest = [a for a in args if a is not type(None)]
        annotation = rest[0] if len(rest) == 1 else None
    try:
        return _KIND_OF_TYPE[annotation], nullable
    except (KeyError, TypeError):
        raise TypeError(
            f"{where}: a hyperparameter is int, float, bool, str or tuple[int, ...] "
            "(optionally | None)"
        ) from None


def timing_values(table: Iterable[HParam]) -> dict[str, Any]:
    """The values a timing run (``bench perf``) sets: each declaration's ``timing``, where it
    has one."""
    return {p.name: p.timing for p in table if p.timing is not NO_TIMING}


#: The engine's keys, as records (``bench config``, the CLI's numeric flags, resolution).
ENGINE_HPARAMS: tuple[HParam, ...] = declarations(EngineParams)


#: Settings that change speed, not the math: recorded in config.json, never hashed.
SPEED_KEYS = frozenset({"channels_last", "compile"})


def own_declarations(params: type[EngineParams]) -> tuple[HParam, ...]:
    """The keys a method's params class declares beyond the engine's (its own, and engine keys
    it redeclares to narrow them), in field order."""
    return tuple(p for p in declarations(params) if p not in ENGINE_HPARAMS)


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
