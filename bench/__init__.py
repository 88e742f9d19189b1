"""debias-bench: a benchmark harness for debiasing methods.

The public API for plugins (methods, datasets, launchers, tables, trackers): everything a
plugin needs is importable from here, ``from debias_bench import Method, hparam,
register_method``. Names load on first use, so ``import debias_bench`` (and ``bench --help``)
does not import torch. Inside the package, modules import each other by their stage path
(``debias_bench.training.method``); a layers contract (``pyproject.toml``) keeps those imports
downward.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from types import ModuleType
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

#: public name -> the module that defines it
_API: dict[str, str] = {
    # run, read and report a grid from Python (the session layer; ``bench`` calls the same)
    "run": "debias_bench.session.run",
    "RunSummary": "debias_bench.session.run",
    "results": "debias_bench.session.results",
    "report": "debias_bench.session.report",
    "compare": "debias_bench.session.compare",
    "status": "debias_bench.session.status",
    "tune": "debias_bench.session.tune",
    "TuneSummary": "debias_bench.session.tune_summary",
    "regress_check": "debias_bench.session.regress",
    "regress_record": "debias_bench.session.regress",
    "regress_kernels": "debias_bench.session.regress",
    "regress_sweep": "debias_bench.session.regress_sweep",
    # methods
    "Method": "debias_bench.training.method",
    "TrainEnv": "debias_bench.training.method",
    "hparam": "debias_bench.config.hparams",
    "REQUIRED": "debias_bench.config.hparams",
    "EngineParams": "debias_bench.config.hparams",
    "Choice": "debias_bench.config.search",
    "Uniform": "debias_bench.config.search",
    "LogUniform": "debias_bench.config.search",
    "IntRange": "debias_bench.config.search",
    "Around": "debias_bench.config.search",
    "predict_labels": "debias_bench.training.metrics",
    "make_classifier": "debias_bench.methods.common",
    "build_backbone": "debias_bench.training.backbones",
    "Backbone": "debias_bench.training.backbones",
    "train_model": "debias_bench.methods.biased",
    "generalized_ce": "debias_bench.methods.losses",
    "SampleLossEMA": "debias_bench.methods.ema",
    "relative_difficulty": "debias_bench.methods.ema",
    "SampleWeights": "debias_bench.methods.state",
    "SampleMask": "debias_bench.methods.state",
    "StepCounter": "debias_bench.methods.state",
    # how a method draws its batches, and named random streams
    "Sampler": "debias_bench.training.sampling",
    "UNIFORM": "debias_bench.training.sampling",
    "GroupBalanced": "debias_bench.training.sampling",
    "Weighted": "debias_bench.training.sampling",
    "sampling_option": "debias_bench.config.sampling",
    "stream_seed": "debias_bench.streams",
    "generator": "debias_bench.streams",
    "rng": "debias_bench.streams",
    # datasets
    "DatasetFamily": "debias_bench.data.family",
    "PresetValues": "debias_bench.data.family_declaration",
    "DataOption": "debias_bench.data.options",
    "DatasetSpec": "debias_bench.data.spec",
    "Split": "debias_bench.data.contract",
    "Splits": "debias_bench.data.contract",
    "Batch": "debias_bench.data.contract",
    "TrainStream": "debias_bench.data.contract",
    "ColourBiasedDigits": "debias_bench.datasets.cmnist",
    "ColoredMNIST": "debias_bench.datasets.cmnist",
    "CachedImageFamily": "debias_bench.datasets.cached",
    "IdxSource": "debias_bench.datasets.mnist_raw",
    # registries
    "METHODS": "debias_bench.registry",
    "DATASETS": "debias_bench.registry",
    "register_method": "debias_bench.registry",
    "register_dataset": "debias_bench.registry",
    "register_backbone": "debias_bench.registry",
    "register_optimizer": "debias_bench.registry",
    # launchers
    "Launcher": "debias_bench.launchers.contract",
    "Task": "debias_bench.launchers.contract",
    "Ended": "debias_bench.launchers.contract",
    "Launchable": "debias_bench.launchers.factories",
    "LaunchContext": "debias_bench.launchers.factories",
    "LauncherOption": "debias_bench.launchers.options",
    "register_launcher": "debias_bench.launchers.factories",
    "WorkerProcess": "debias_bench.launchers.process",
    # report tables
    "Cell": "debias_bench.reporting.model",
    "Column": "debias_bench.reporting.model",
    "Row": "debias_bench.reporting.model",
    "Table": "debias_bench.reporting.model",
    "register_table": "debias_bench.reporting.catalog",
    "method_name": "debias_bench.reporting.layout",
    "method_order": "debias_bench.reporting.layout",
    "finished": "debias_bench.reporting.runs",
    "seed_stats": "debias_bench.reporting.stats",
    # trackers
    "Tracker": "debias_bench.tracking.base",
    "TrackedRun": "debias_bench.tracking.base",
    "TRACKERS": "debias_bench.tracking.base",
    "register_tracker": "debias_bench.tracking.base",
    # errors
    "BenchError": "debias_bench.errors",
    "ConfigError": "debias_bench.errors",
    "DataNotFoundError": "debias_bench.errors",
    "CorruptDataError": "debias_bench.errors",
    "UnknownNameError": "debias_bench.errors",
}
__all__ = [
    "DATASETS",
    "METHODS",
    "REQUIRED",
    "TRACKERS",
    "UNIFORM",
    "Around",
    "Backbone",
    "Batch",
    "BenchError",
    "CachedImageFamily",
    "Cell",
    "Choice",
    "ColoredMNIST",
    "ColourBiasedDigits",
    "Column",
    "ConfigError",
    "CorruptDataError",
    "DataNotFoundError",
    "DataOption",
    "DatasetFamily",
    "DatasetSpec",
    "Ended",
    "EngineParams",
    "GroupBalanced",
    "IdxSource",
    "IntRange",
    "LaunchContext",
    "Launchable",
    "Launcher",
    "LauncherOption",
    "LogUniform",
    "Method",
    "PresetValues",
    "Row",
    "RunSummary",
    "SampleLossEMA",
    "SampleMask",
    "SampleWeights",
    "Sampler",
    "Split",
    "Splits",
    "StepCounter",
    "Table",
    "Task",
    "TrackedRun",
    "Tracker",
    "TrainEnv",
    "TrainStream",
    "TuneSummary",
    "Uniform",
    "UnknownNameError",
    "Weighted",
    "WorkerProcess",
    "__version__",
    "build_backbone",
    "compare",
    "finished",
    "generalized_ce",
    "generator",
    "hparam",
    "make_classifier",
    "method_name",
    "method_order",
    "predict_labels",
    "register_backbone",
    "register_dataset",
    "register_launcher",
    "register_method",
    "register_optimizer",
    "register_table",
    "register_tracker",
    "regress_check",
    "regress_kernels",
    "regress_record",
    "regress_sweep",
    "relative_difficulty",
    "report",
    "results",
    "rng",
    "run",
    "sampling_option",
    "seed_stats",
    "status",
    "stream_seed",
    "train_model",
    "tune",
]


def __getattr__(name: str) -> Any:
    """A public name, imported from its module on first use."""
    module = _API.get(name)
    if module is None:
        raise AttributeError(f"module 'debias_bench' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_API})


#: module paths of the flat layout (before 2026-11-26) -> their stage home; plugins that
#: import them get the new module and a DeprecationWarning, for one release
MOVED: dict[str, str] = {
    "debias_bench.hparams": "debias_bench.config.hparams",
    "debias_bench.search": "debias_bench.config.search",
    "debias_bench.run_length": "debias_bench.config.run_length",
    "debias_bench.grid": "debias_bench.config.grid",
    "debias_bench.family": "debias_bench.data.family",
    "debias_bench.split_store": "debias_bench.data.split_store",
    "debias_bench.folder_swap": "debias_bench.data.folder_swap",
    "debias_bench.integrity": "debias_bench.data.integrity",
    "debias_bench.data_options": "debias_bench.data.options",
    "debias_bench.dataset_facts": "debias_bench.data.facts",
    "debias_bench.download": "debias_bench.data.download",
    "debias_bench.iid": "debias_bench.data.iid",
    "debias_bench.progress": "debias_bench.data.progress",
    "debias_bench.engine": "debias_bench.training.engine",
    "debias_bench.method": "debias_bench.training.method",
    "debias_bench.optim": "debias_bench.training.optim",
    "debias_bench.backbones": "debias_bench.training.backbones",
    "debias_bench.acceleration": "debias_bench.training.acceleration",
    "debias_bench.metrics": "debias_bench.training.metrics",
    "debias_bench.nc": "debias_bench.training.nc",
    "debias_bench.cam": "debias_bench.training.cam",
    "debias_bench.store": "debias_bench.runs.store",
    "debias_bench.states": "debias_bench.runs.states",
    "debias_bench.runfiles": "debias_bench.runs.files",
    "debias_bench.runlock": "debias_bench.runs.lock",
    "debias_bench.heartbeat": "debias_bench.runs.heartbeat",
    "debias_bench.runprogress": "debias_bench.runs.progress",
    "debias_bench.provenance": "debias_bench.runs.provenance",
    "debias_bench.jsonio": "debias_bench.runs.jsonio",
    "debias_bench.sweep": "debias_bench.launchers.run_one",
    "debias_bench.preflight": "debias_bench.launchers.preflight",
    "debias_bench.launchers.plugins": "debias_bench.plugins.loading",
    "debias_bench.figures": "debias_bench.reporting.figures",
    "debias_bench.reporting.tuned": "debias_bench.analysis.tuning_report",
    "debias_bench.tune": "debias_bench.analysis.tuning",
    "debias_bench.regress": "debias_bench.analysis.regression",
    "debias_bench.ablations": "debias_bench.analysis.ablations",
    "debias_bench.overhead": "debias_bench.perf.overhead",
    "debias_bench.projection": "debias_bench.perf.projection",
    "debias_bench.tracking.cost": "debias_bench.perf.tracking_cost",
    "debias_bench.commands.perf_tables": "debias_bench.perf.tables",
}


_STORE, _SWAP = "debias_bench.data.split_store", "debias_bench.data.folder_swap"
#: names a module of the 2026-11-26 layout offered (its re-exports) that moved out of it since:
#: module -> name -> where it lives now; importing one from the old module still works, with a
#: DeprecationWarning, for one release (:func:`former_names`)
FORMER_NAMES: dict[str, dict[str, str]] = {
    "debias_bench.data.family": {
        **dict.fromkeys(("IMPORTING", "OLD_MARK"), _SWAP),
        **dict.fromkeys(
            ("describe_dataset", "describe_split", "publish_dataset", "ratio_dirname"), _STORE
        ),
        **dict.fromkeys(("save_split", "verify_manifest"), _STORE),
        "load_split": "debias_bench.data.split_loading",
    },
}


def former_names(module: str) -> Any:
    """A module's ``__getattr__`` that forwards the names it once offered
    (:data:`FORMER_NAMES`) to their new home, with a DeprecationWarning."""

    def __getattr__(name: str) -> Any:
        home = FORMER_NAMES.get(module, {}).get(name)
        if home is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        _warn(f"{module}.{name}", f"{home}.{name}")
        return getattr(importlib.import_module(home), name)

    return __getattr__


def moved_attribute(package: str, home: str) -> Any:
    """A package's ``__getattr__`` for a flat module that became that package (``config``,
    ``data``, ``perf``): its names, from ``home``, with a DeprecationWarning."""

    def __getattr__(name: str) -> Any:
        module = importlib.import_module(home)
        if name.startswith("__") or not hasattr(module, name):
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        _warn(f"{package}.{name}", f"{home}.{name}")
        value = getattr(module, name)
        setattr(sys.modules[package], name, value)  # warned once
        return value

    return __getattr__


def _warn(old: str, new: str) -> None:
    warnings.warn(
        f"{old} moved to {new}; import it from debias_bench (the plugin API) instead: the old "
        "path goes in the next release",
        DeprecationWarning,
        stacklevel=3,
    )


class _MovedModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Resolves an old module path to its new module (the same module object)."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in MOVED:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(spec.name, MOVED[spec.name])
        return importlib.import_module(MOVED[spec.name])

    def exec_module(self, module: ModuleType) -> None:
        pass


if not any(isinstance(finder, _MovedModules) for finder in sys.meta_path):
    sys.meta_path.insert(0, _MovedModules())

if TYPE_CHECKING:  # what static tools (mypy, the docs) see of the lazy names
    from debias_bench.config.hparams import REQUIRED, EngineParams, hparam
    from debias_bench.config.sampling import sampling_option
    from debias_bench.config.search import Around, Choice, IntRange, LogUniform, Uniform
    from debias_bench.data.contract import Batch, Split, Splits, TrainStream
    from debias_bench.data.family import DatasetFamily
    from debias_bench.data.family_declaration import PresetValues
    from debias_bench.data.options import DataOption
    from debias_bench.data.spec import DatasetSpec
    from debias_bench.datasets.cached import CachedImageFamily
    from debias_bench.datasets.cmnist import ColoredMNIST, ColourBiasedDigits
    from debias_bench.datasets.mnist_raw import IdxSource
    from debias_bench.errors import (
        BenchError,
        ConfigError,
        CorruptDataError,
        DataNotFoundError,
        UnknownNameError,
    )
    from debias_bench.launchers.contract import Ended, Launcher, Task
    from debias_bench.launchers.factories import Launchable, LaunchContext, register_launcher
    from debias_bench.launchers.options import LauncherOption
    from debias_bench.launchers.process import WorkerProcess
    from debias_bench.methods.biased import train_model
    from debias_bench.methods.common import make_classifier
    from debias_bench.methods.ema import SampleLossEMA, relative_difficulty
    from debias_bench.methods.losses import generalized_ce
    from debias_bench.methods.state import SampleMask, SampleWeights, StepCounter
    from debias_bench.registry import (
        DATASETS,
        METHODS,
        register_backbone,
        register_dataset,
        register_method,
        register_optimizer,
    )
    from debias_bench.reporting.catalog import register_table
    from debias_bench.reporting.layout import method_name, method_order
    from debias_bench.reporting.model import Cell, Column, Row, Table
    from debias_bench.reporting.runs import finished
    from debias_bench.reporting.stats import seed_stats
    from debias_bench.session.compare import compare
    from debias_bench.session.regress import regress_check, regress_kernels, regress_record
    from debias_bench.session.regress_sweep import regress_sweep
    from debias_bench.session.report import report
    from debias_bench.session.results import results
    from debias_bench.session.run import RunSummary, run
    from debias_bench.session.status import status
    from debias_bench.session.tune import tune
    from debias_bench.session.tune_summary import TuneSummary
    from debias_bench.streams import generator, rng, stream_seed
    from debias_bench.tracking.base import TRACKERS, TrackedRun, Tracker, register_tracker
    from debias_bench.training.backbones import Backbone, build_backbone
    from debias_bench.training.method import Method, TrainEnv
    from debias_bench.training.metrics import predict_labels
    from debias_bench.training.sampling import UNIFORM, GroupBalanced, Sampler, Weighted
