"""Run configuration: hyperparameter resolution, presets, protocols and run identity.

Hyperparameters of a run are resolved in this order, later layers winning (``bench config
METHOD DATASET`` prints every value with its layer):

1. declared defaults (``debias_bench.config.hparams``: the engine's keys and the method's params)
   and the dataset's default backbone;
2. the protocol's engine-wide switches (``PROTOCOLS``);
3. the method's YAML (``debias_bench.config.method_yaml_file``): ``defaults``, then
   ``datasets.<dataset>`` (or, for a dataset registered with ``recipe="cmnist"`` and no entry of
   its own, ``datasets.cmnist``), then its ``ratios.<ratio>``, then ``protocols.<protocol>``;
4. the preset: its engine-wide values (``PRESETS``), then what the dataset's family declares
   for it (``DatasetFamily.presets``: its recipe's values, then its own; see
   ``debias_bench.data.facts``), then the method's own adjustments to it:
   ``presets.<preset>`` and ``datasets.<dataset>.presets.<preset>`` in its YAML (e.g. LfF+BE's
   committee, which keeps its length in a short run);
5. ``--epochs``;
6. tuned values (``bench run --hparams tuned.yaml``);
7. ``--set key=value`` overrides;
8. a step count declared ``run_share`` whose value still comes from 1-3 takes the same share of
   the run's length as of the recipe's (``debias_bench.config.run_length``; DisEnt's swap start).

Every value is parsed and checked against its declaration at every layer, so a typo or an
out-of-range value is an error before any run exists.

What a run is asked to be (method, dataset, ratio, seed, protocol, preset, ``--epochs``,
``--set``, dataset options, tuned values) is one :class:`RunRequest`; :func:`resolve_layers`
resolves it, :meth:`RunRequest.config` makes it a :class:`RunConfig`, and the run's typed params
are built once from the resolved values (:attr:`RunConfig.params`).

A run's id is a hash of everything that defines its result (method, dataset, ratio, seed,
protocol, dataset options and the resolved hyperparameters); the preset's name, the code
version and the dataset version are recorded beside it but not hashed.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from functools import cached_property
from typing import Any

import yaml

from debias_bench.config.hparams import (
    ENGINE_HPARAMS,
    REQUIRED,
    SPEED_KEYS,
    EngineParams,
    HParam,
    declared,
    own_declarations,
    unknown_key,
)
from debias_bench.config.method_params import method_params
from debias_bench.config.method_yaml_file import method_yaml, yaml_keys, yaml_name
from debias_bench.config.run_length import scale_to_run
from debias_bench.data.facts import dataset_recipe, preset_hparams
from debias_bench.data.facts import preset_data_options as preset_data_options  # re-export
from debias_bench.errors import ConfigError, UnknownNameError
from debias_bench.registry import DATASETS, METHODS

#: the engine's declarations by key (a method's own or redeclared keys are not these objects)
_ENGINE = {p.name: p for p in ENGINE_HPARAMS}

#: Engine-wide switches of each protocol: none. A quirk of an official code belongs to the
#: methods whose code has it and to no other, declared under ``protocols.<name>`` in each one's
#: YAML, where ``bench config`` shows it: the LfF-line MLPs' second division by 255
#: (``input_div255``: Vanilla, LfF, LfF+BE, DisEnt, SelecMix, ETF-Debias, SD, EnD; not
#: GroupDRO, JTT or PGD, whose official codes feed [0, 1] inputs), EnD's and ETF-Debias's
#: schedules, EnD's and SelecMix's pair conventions.
PROTOCOLS: dict[str, dict[str, Any]] = {
    # Each method as its official code trains it, quirks included: reproduces the published
    # tables.
    "official": {},
    # The same recipes without the official quirks: the honest comparison.
    "clean": {},
}

#: Each protocol's reference method: a method whose YAML names none of the keys the reference
#: sets under ``protocols.<protocol>`` (a plugin written from the docs) gets the reference's
#: values of them, so that it is trained on the baselines' terms (Vanilla's second division by
#: 255 under ``official``) unless it declares its own (``debias_bench.config.terms``).
REFERENCE_METHOD = {"official": "vanilla", "clean": "vanilla"}

#: The engine-wide values of each ``--preset``; a dataset adds its own on its family class
#: (``DatasetFamily.presets``, resolved with its recipe by ``dataset_facts.preset_hparams``).
PRESETS: dict[str, dict[str, Any]] = {
    # the methods' own configurations (paper appendix B / official repositories)
    "paper": {},
    # a real but short comparison: about a minute per Colored MNIST run on a laptop CPU
    "quick": {"epochs": 30, "eval_every_epochs": 3},
    # plumbing check: a few steps on every dataset, small evaluation subsets, nothing to
    # download (a dataset replaces what would need one, e.g. BAR's pretrained ResNet-18)
    "smoke": {"steps": 20, "eval_every": 10, "eval_limit": 500, "eval_batch_size": 256},
    # regression checks in CI (`bench regress`): a small fixed subset of every dataset (each
    # declares its own), a short schedule, one thread per run (identical numbers on any core
    # count), a few seconds per run on one CPU core
    "ci": {
        "steps": 60,
        "eval_every": 30,
        "eval_limit": 1000,
        "eval_batch_size": 500,
        "num_threads": 1,
    },
}


def _check(name: str, table: dict[str, Any], kind: str) -> dict[str, Any]:
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=1)
        raise UnknownNameError(
            f"unknown {kind} {name!r}; valid names: {', '.join(table)}",
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    return table[name]


def parse_overrides(items: list[str] | None) -> dict[str, Any]:
    """``["lr=1e-3", "alpha=0"]`` -> ``{"lr": 0.001, "alpha": 0}`` (values parsed as YAML)."""
    out: dict[str, Any] = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"bad override {item!r}", hint="use --set key=value, e.g. lr=1e-3")
        parsed = yaml.safe_load(value) if value.strip() else None
        # YAML reads "1e-3" as a string; accept the float spelling people type
        if isinstance(parsed, str):
            with contextlib.suppress(ValueError):
                parsed = float(parsed)
        out[key.strip()] = parsed
    return out


def _by_ratio(table: dict[Any, Any], ratio: float | None) -> dict[str, Any]:
    if ratio is None:
        return {}
    return next((v or {} for k, v in table.items() if float(k) == float(ratio)), {})


def method_hparams(method: str) -> dict[str, HParam]:
    """Every key ``method`` may use: the engine's declarations and the method's own."""
    return declared(own_declarations(method_params(method)))


@dataclass(frozen=True)
class Resolution:
    """Resolved hyperparameters and, per key, the layer its value came from."""

    values: dict[str, Any]
    sources: dict[str, str]
    recipe: str | None = None  # the dataset whose method settings were used, when not its own

    def rows(self) -> list[tuple[str, Any, str]]:
        return [(k, self.values[k], self.sources[k]) for k in sorted(self.values)]


def recipe_dataset(method: str, dataset: str) -> str | None:
    """Which dataset's entry of the method's YAML applies to ``dataset``: its own, else its
    recipe's; None when neither exists (the method then runs with its bare defaults)."""
    entries = method_yaml(method).get("datasets") or {}
    if dataset in entries:
        return dataset
    recipe = dataset_recipe(dataset)
    return recipe if recipe in entries else None


#: the sources of the layers above a method's recipe and the run's preset: a value from one
#: of them makes a run a variant of its recipe (``reproduction.overrides``)
EPOCHS_LAYER, TUNED_LAYER, SET_LAYER = "--epochs", "tuned", "--set"
OFF_RECIPE_LAYERS = (EPOCHS_LAYER, TUNED_LAYER, SET_LAYER)


@dataclass(frozen=True)
class RunRequest:
    """What a run is asked to be, before resolution: the one argument of :func:`resolve_layers`
    and :meth:`config` (``bench run``'s grid makes one per run, ``bench config`` one).

    ``ratio`` None resolves without the YAML's ``ratios.<r>`` layer (``bench tune``'s recipe
    values); a run needs one. ``overrides``: ``--set``; ``tuned``: the cell's values of
    ``--hparams tuned.yaml``; ``data_options``: recorded in the config (and hashed), not
    resolved here (``debias_bench.data.options`` checks them)."""

    method: str
    dataset: str
    ratio: float | None = None
    seed: int = 0
    protocol: str = "official"
    preset: str = "paper"
    epochs: int | None = None
    overrides: Mapping[str, Any] = field(default_factory=dict)
    data_options: Mapping[str, Any] = field(default_factory=dict)
    tuned: Mapping[str, Any] | None = None

    def config(self) -> RunConfig:
        """The run's configuration: its hyperparameters resolved, its seed checked."""
        if self.ratio is None:
            raise ConfigError(
                f"{self.method} on {self.dataset}: a run needs a ratio",
                hint="give one of its ratios: "
                + ", ".join(f"{r:g}" for r in DATASETS.get(self.dataset).spec.ratios),
            )
        check_seed(self.seed)
        resolved = resolve_layers(self)
        return RunConfig(
            method=self.method,
            dataset=self.dataset,
            ratio=float(self.ratio),
            seed=int(self.seed),
            protocol=self.protocol,
            hparams=resolved.values,
            data_options=dict(self.data_options or {}),
            preset=self.preset,
            sources=resolved.sources,
            recipe=resolved.recipe,
        )


def resolve_layers(request: RunRequest) -> Resolution:
    """Every hyperparameter of the requested run with the layer it came from (module
    docstring's order); each value parsed and checked against its declaration."""
    method, dataset, ratio = request.method, request.dataset, request.ratio
    protocol, preset = request.protocol, request.preset
    spec = DATASETS.get(dataset).spec
    doc = method_yaml(method)
    table = method_hparams(method)
    own = recipe_dataset(method, dataset)
    per_dataset = dict((doc.get("datasets") or {}).get(own) or {}) if own else {}
    per_ratio = per_dataset.pop("ratios", None) or {}
    dataset_presets = per_dataset.pop("presets", None) or {}
    via = f" (recipe of {dataset})" if own and own != dataset else ""
    preset_values = dict(_check(preset, PRESETS, "preset"))
    dataset_preset = preset_hparams(preset, dataset)

    values: dict[str, Any] = {}
    sources: dict[str, str] = {}

    def layer(source: str, items: Mapping[str, Any] | None) -> None:
        for key, value in (items or {}).items():
            if key not in table:
                raise unknown_key(key, table, f"{method} on {dataset}, {source}")
            values[key] = table[key].parse(value, f"{method} on {dataset}, {source}")
            sources[key] = source

    defaults = {k: p.default for k, p in table.items() if p.default is not REQUIRED}
    engine = {k: v for k, v in defaults.items() if table[k] is _ENGINE.get(k)}
    layer("engine default", engine)
    layer(
        f"{method} declaration",
        {k: v for k, v in defaults.items() if k not in engine},
    )
    layer(f"dataset {dataset} (default backbone)", {"backbone": spec.backbone})
    layer(f"protocol {protocol}", _check(protocol, PROTOCOLS, "protocol"))
    reference = REFERENCE_METHOD.get(protocol)
    layer(f"protocol {protocol} (terms of {reference})", reference_terms(method, protocol))
    name = yaml_name(method)
    layer(f"{name} defaults", doc.get("defaults"))
    layer(f"{name} datasets.{own}{via}", per_dataset)
    if ratio is not None:
        layer(f"{name} datasets.{own}.ratios.{ratio:g}{via}", _by_ratio(per_ratio, ratio))
    layer(f"{name} protocols.{protocol}", (doc.get("protocols") or {}).get(protocol))
    recipe, recipe_sources = dict(values), dict(sources)
    preset_keys = set(preset_values).union(*(values for _, values in dataset_preset))
    if "epochs" in preset_keys and "steps" not in preset_keys and values.get("steps") is not None:
        preset_values["steps"] = None  # a preset length replaces a YAML step count
    layer(f"preset {preset}", preset_values)
    for source, dataset_values in dataset_preset:
        layer(f"preset {preset} ({source})", dataset_values)
    layer(f"{name} presets.{preset}", (doc.get("presets") or {}).get(preset))
    layer(f"{name} datasets.{own}.presets.{preset}{via}", dataset_presets.get(preset))
    if request.epochs is not None:
        layer(EPOCHS_LAYER, {"epochs": request.epochs, "steps": None})
    layer(TUNED_LAYER, request.tuned)
    layer(SET_LAYER, request.overrides)
    _check_required(table, values, f"{method} on {dataset}")
    scale_to_run(table, values, sources, recipe, recipe_sources, dataset, ratio)
    return Resolution(values, sources, recipe=own if own != dataset else None)


def reference_terms(method: str, protocol: str) -> dict[str, Any]:
    """The engine keys the protocol's reference method sets under ``protocols.<protocol>`` that
    ``method`` leaves undeclared (no recipe layer of its YAML names them, its params class does
    not redeclare them): the terms it is trained on by default (:data:`REFERENCE_METHOD`)."""
    reference = REFERENCE_METHOD.get(protocol)
    if reference is None or reference == method or reference not in METHODS:
        return {}
    terms = (method_yaml(reference).get("protocols") or {}).get(protocol) or {}
    own = {p.name for p in own_declarations(method_params(method))} | yaml_keys(method)
    return {k: v for k, v in terms.items() if k in _ENGINE and k not in own}


def _check_required(table: dict[str, HParam], values: dict[str, Any], where: str) -> None:
    """A ConfigError naming the declared keys without a default that no layer gave."""
    missing = sorted(k for k, p in table.items() if p.default is REQUIRED and k not in values)
    if missing:
        raise ConfigError(
            f"{where}: no value for {', '.join(missing)}",
            hint="give it in the method's YAML defaults or with --set KEY=VALUE",
        )


def resolve_hparams(
    method: str, dataset: str, protocol: str = "official", **request: Any
) -> dict[str, Any]:
    """The resolved values of ``RunRequest(method, dataset, protocol=protocol, **request)``: a
    keyword form for tests and scripts (the package passes a :class:`RunRequest`)."""
    return resolve_layers(RunRequest(method, dataset, protocol=protocol, **request)).values


def _left_out_of_identity(method: str, key: str, value: Any) -> bool:
    """Speed-only keys, and keys declared ``late`` (by the engine, or by the method after its
    ids were published) while they sit at their default and no recipe layer of the method's
    YAML names them (so those ids stay valid: :func:`yaml_keys`)."""
    if key in SPEED_KEYS:
        return True
    param = _ENGINE_PARAMS.get(key)
    if param is None and method in METHODS:
        param = _own_params(method_params(method)).get(key)
    if param is None or not param.late or value != param.default:
        return False
    return key not in yaml_keys(method)


_ENGINE_PARAMS = {p.name: p for p in ENGINE_HPARAMS}


_OWN_PARAMS: dict[type[EngineParams], dict[str, HParam]] = {}


def _own_params(params: type[EngineParams]) -> dict[str, HParam]:
    """A params class's own declarations by name, kept per class (a run's identity asks for
    each key of each run a sweep plans or reads: 18,528 lookups to read a store of 70 runs)."""
    if params not in _OWN_PARAMS:
        _OWN_PARAMS[params] = {p.name: p for p in own_declarations(params)}
    return _OWN_PARAMS[params]


#: seeds are what torch, NumPy and Python's ``random`` accept alike; beyond, seeds that differ by
#: 2**32 would train the same model under two run ids
SEED_RANGE = range(2**32)


def check_seed(seed: Any) -> int:
    """``seed`` as an int in ``SEED_RANGE``; ConfigError naming the range otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or seed not in SEED_RANGE:
        raise ConfigError(
            f"seed {seed!r} is out of range", hint="seeds are integers with 0 <= seed < 2**32"
        )
    return seed


@dataclass(frozen=True)
class RunConfig:
    method: str
    dataset: str
    ratio: float
    seed: int
    protocol: str = "official"
    hparams: dict[str, Any] = field(default_factory=dict)
    data_options: dict[str, Any] = field(default_factory=dict)
    preset: str = "paper"  # recorded, not hashed: its effect is in ``hparams``
    #: recorded, not hashed: where each value came from, and the recipe dataset if not its own
    sources: dict[str, str] = field(default_factory=dict)
    recipe: str | None = None

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        for key in ("preset", "sources", "recipe"):
            d.pop(key)
        d["hparams"] = {
            k: v for k, v in d["hparams"].items() if not _left_out_of_identity(self.method, k, v)
        }
        return d

    @property
    def digest(self) -> str:
        """The SHA-256 of the run's identity: ``result.json`` and the checkpoint carry it, so a
        file written for another configuration is never taken as this run's."""
        canonical = json.dumps(self.identity(), sort_keys=True, default=str)
        return hashlib.sha256(canonical.encode()).hexdigest()

    @property
    def run_id(self) -> str:
        return f"{self.dataset}_{self.method}_r{self.ratio:g}_s{self.seed}_{self.digest[:10]}"

    @cached_property
    def params(self) -> EngineParams:
        """The run's typed params (its method's ``Params``), built from ``hparams`` on first
        use and kept: the engine, the method and its pieces all read this one object."""
        params: EngineParams = method_params(self.method).of(self.hparams)
        return params

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunConfig:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def make_config(method: str, dataset: str, ratio: float, seed: int, **request: Any) -> RunConfig:
    """``RunRequest(method, dataset, ratio, seed, **request).config()``: a keyword form for tests
    and scripts (the package passes a :class:`RunRequest`)."""
    return RunRequest(method, dataset, ratio, seed, **request).config()
