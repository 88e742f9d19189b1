"""Run configuration: hyperparameter resolution, presets, protocols and run identity.

Hyperparameters of a run are resolved in this order, later layers winning:

1. engine defaults (``ENGINE_DEFAULTS``) and the dataset's default backbone;
2. the protocol's engine-wide switches (``PROTOCOLS``);
3. the method's YAML: ``defaults``, then ``datasets.<dataset>``, then
   ``datasets.<dataset>.ratios.<ratio>``, then ``protocols.<protocol>``;
4. the preset (``PRESETS``), then the method's own adjustments to it: ``presets.<preset>`` and
   ``datasets.<dataset>.presets.<preset>`` in its YAML (e.g. DisEnt's swap start, which is a
   step count, scaled to a short run);
5. ``--epochs``;
6. ``--set key=value`` overrides.

A run's id is a hash of everything that defines its result (method, dataset, ratio, seed,
protocol, dataset options and the resolved hyperparameters); the preset's name, the code
version and the dataset version are recorded beside it but not hashed.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
import json
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from typing import Any

import yaml

from debias_bench.errors import ConfigError, UnknownNameError
from debias_bench.registry import DATASETS, METHODS

ENGINE_DEFAULTS: dict[str, Any] = {
    "batch_size": 256,
    "epochs": 100,
    "steps": None,  # when set, overrides epochs
    "eval_every": None,  # in steps; None: every ``eval_every_epochs`` epochs
    "eval_every_epochs": 1,
    "eval_batch_size": 1024,
    "train_limit": None,  # use a seeded random subset of this many training samples
    "eval_limit": None,  # evaluate on a seeded random subset of valid/test of this size
    "input_div255": False,
    "pretrained_weights": None,  # path of ImageNet weights for resnet18_pretrained
    "track_nc": False,  # Neural Collapse metrics on training features at every evaluation
    "nc_limit": 10000,  # ... on a seeded subset of this many training samples
    "image_size": None,  # resize every split to this side (short CPU checks; ResNets only)
    "num_threads": None,  # pin the run's CPU threads (results then do not depend on the cores)
    # speed (debias_bench.acceleration): mixed precision, NHWC weights, torch.compile
    "amp": "none",
    "channels_last": "auto",
    "compile": False,
}

#: Settings that change speed, not the math: recorded in config.json, never hashed.
SPEED_KEYS = frozenset({"channels_last", "compile"})

#: Keys added after run ids were first published: at these values they are left out of a
#: run's hash, so runs recorded before the key existed keep their ids (and stay "done").
IDENTITY_NEUTRAL_DEFAULTS: dict[str, Any] = {"image_size": None, "num_threads": None, "amp": "none"}

#: Engine-wide switches of each protocol; methods add their own under ``protocols:`` in YAML.
PROTOCOLS: dict[str, dict[str, Any]] = {
    # The official repositories' behaviour, needed to reproduce the published tables:
    # the MLPs divide their [0, 1] input by 255 again.
    "official": {"input_div255": True},
    # The same recipes without the official quirks: the honest comparison.
    "clean": {"input_div255": False},
}

#: Overrides applied by ``--preset``.
PRESETS: dict[str, dict[str, Any]] = {
    # the methods' own configurations (paper appendix B / official repositories)
    "paper": {},
    # a real but short comparison: about a minute per Colored MNIST run on a laptop CPU
    "quick": {"epochs": 30, "eval_every_epochs": 3},
    # plumbing check: a few steps on every dataset, small evaluation subsets, nothing to
    # download (BAR's ImageNet-pretrained ResNet-18 is replaced by a scratch one)
    "smoke": {
        "steps": 20,
        "eval_every": 10,
        "eval_limit": 500,
        "eval_batch_size": 256,
        "datasets": {"bar": {"backbone": "resnet18"}},
    },
    # regression checks in CI (`bench regress`): a small fixed subset of every dataset, a short
    # schedule, one thread per run (identical numbers on any core count), a few seconds per run
    # on one CPU core: the image sets are read at 16 px by the paper's ResNet-20
    "ci": {
        "steps": 60,
        "eval_every": 30,
        "eval_limit": 1000,
        "eval_batch_size": 500,
        "num_threads": 1,
        "datasets": {
            "cmnist": {"train_limit": 6000, "batch_size": 256, "steps": 240, "eval_every": 120},
            **{
                name: {"backbone": "resnet20", "batch_size": 32, "image_size": 16}
                for name in ("cifar10c", "dogs_and_cats", "bar")
            },
            # read-only published folder (no small build): a seeded subset of the train split
            "bffhq": {
                "backbone": "resnet20",
                "batch_size": 32,
                "image_size": 16,
                "train_limit": 1000,
            },
        },
    },
}

#: Dataset build options a preset brings (``--data-option`` wins): the ``ci`` preset builds
#: small fixed subsets instead of reading a full build (fast to prepare on a CI machine).
PRESET_DATA_OPTIONS: dict[str, dict[str, dict[str, Any]]] = {
    "ci": {
        "cifar10c": {"limit": 100, "valid_size": 200},
        "dogs_and_cats": {"limit_per_group": 150},
        "bar": {"limit_per_class": 60},
    },
}


def preset_data_options(preset: str, dataset: str) -> dict[str, Any]:
    """The build options ``preset`` sets for ``dataset`` (empty for most)."""
    return dict(PRESET_DATA_OPTIONS.get(preset, {}).get(dataset, {}))


def _check(name: str, table: dict[str, Any], kind: str) -> dict[str, Any]:
    if name not in table:
        close = difflib.get_close_matches(name, list(table), n=1)
        raise UnknownNameError(
            f"unknown {kind} {name!r}; valid names: {', '.join(table)}",
            hint=f"did you mean {close[0]!r}?" if close else None,
        )
    return table[name]


@cache
def method_yaml(method: str) -> dict[str, Any]:
    """The YAML beside a method's module (``methods/<name>.yaml``); empty when absent."""
    module = METHODS.get(method).__module__
    package, _, stem = module.rpartition(".")
    if not package:  # a method defined in a top-level plugin module has no package data
        return {}
    path = resources.files(package) / f"{stem}.yaml"
    if not path.is_file():
        return {}
    data = yaml.safe_load(path.read_text()) or {}
    unknown = set(data) - {"defaults", "datasets", "protocols", "presets", "search"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown)}")
    return data


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


def resolve_hparams(
    method: str,
    dataset: str,
    protocol: str = "official",
    preset: str = "paper",
    epochs: int | None = None,
    overrides: dict[str, Any] | None = None,
    ratio: float | None = None,
) -> dict[str, Any]:
    spec = DATASETS.get(dataset).spec
    doc = method_yaml(method)
    per_dataset = dict((doc.get("datasets") or {}).get(dataset) or {})
    per_ratio = per_dataset.pop("ratios", None) or {}
    dataset_presets = per_dataset.pop("presets", None) or {}
    hp: dict[str, Any] = {**ENGINE_DEFAULTS, "backbone": spec.backbone}
    hp.update(_check(protocol, PROTOCOLS, "protocol"))
    hp.update(doc.get("defaults") or {})
    hp.update(per_dataset)
    hp.update(_by_ratio(per_ratio, ratio))
    hp.update((doc.get("protocols") or {}).get(protocol) or {})
    preset_values = dict(_check(preset, PRESETS, "preset"))
    preset_values.update((preset_values.pop("datasets", None) or {}).get(dataset) or {})
    if "epochs" in preset_values and hp.get("steps") is not None:
        preset_values.setdefault("steps", None)  # a preset length replaces a YAML step count
    hp.update(preset_values)
    hp.update((doc.get("presets") or {}).get(preset) or {})
    hp.update(dataset_presets.get(preset) or {})
    if epochs is not None:
        hp.update(epochs=int(epochs), steps=None)
    for key, value in (overrides or {}).items():
        if key not in hp:
            close = difflib.get_close_matches(key, list(hp), n=1)
            raise ConfigError(
                f"--set {key}: {method} on {dataset} has no hyperparameter {key!r}",
                hint=(f"did you mean {close[0]!r}? " if close else "")
                + f"known: {', '.join(sorted(hp))}",
            )
        hp[key] = value
    return hp


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

    def identity(self) -> dict[str, Any]:
        d = asdict(self)
        d.pop("preset")
        d["hparams"] = {
            k: v
            for k, v in d["hparams"].items()
            if k not in SPEED_KEYS
            and (k not in IDENTITY_NEUTRAL_DEFAULTS or v != IDENTITY_NEUTRAL_DEFAULTS[k])
        }
        return d

    @property
    def run_id(self) -> str:
        canonical = json.dumps(self.identity(), sort_keys=True, default=str)
        digest = hashlib.sha256(canonical.encode()).hexdigest()[:10]
        return f"{self.dataset}_{self.method}_r{self.ratio:g}_s{self.seed}_{digest}"

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> RunConfig:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def make_config(
    method: str,
    dataset: str,
    ratio: float,
    seed: int,
    protocol: str = "official",
    preset: str = "paper",
    epochs: int | None = None,
    overrides: dict[str, Any] | None = None,
    data_options: dict[str, Any] | None = None,
) -> RunConfig:
    hp = resolve_hparams(method, dataset, protocol, preset, epochs, overrides, ratio)
    return RunConfig(
        method=method,
        dataset=dataset,
        ratio=float(ratio),
        seed=int(seed),
        protocol=protocol,
        hparams=hp,
        data_options=dict(data_options or {}),
        preset=preset,
    )
