"""Fair tuning: search spaces, per-key seeded sampling, selection on validation, ``tuned.yaml``.

**Search spaces** are declared with each key (``hparam(..., search=Uniform(0.5, 0.9))``, see
:mod:`debias_bench.config.search`; the engine's ``lr`` is searched a decade either side of each
recipe's value, ``weight_decay`` on 1e-6..1e-3). The ``search:`` block at the end of a method's
YAML (``methods/<name>.yaml``) overrides them where the method or a dataset differs::

    search:
      defaults:                                   # every dataset
        weight_decay: {log_uniform: [1.0e-6, 1.0e-1]}
        committee_members: {int: [3, 7]}
        shortcut: {choice: [etf, onehot, random]}
      datasets:                                   # where a dataset differs
        bar: {lr: {log_uniform: [1.0e-6, 1.0e-4]}, weight_decay: null}  # null: not tuned there

A dataset without an entry follows its recipe's (``recipe="cmnist"`` at registration), as the
method's settings do. Every distribution is checked against the key's declaration (kind and
range) before anything runs.

**Sampling** (DomainBed's rule, with Optuna's samplers through ask-and-tell): trial 0 of every
cell (method x dataset x ratio) is the method's own configuration; trial ``i >= 1`` takes the
``i``-th draw of one :class:`optuna.samplers.RandomSampler` *per hyperparameter*, seeded by a
hash of (sampler seed, method, dataset, ratio, key). Adding or dropping a key, or asking for
more trials, never changes the other keys' draws, and a rerun draws the same values (so its
trials are the same runs in the store, skipped when done). Floats are rounded to 4 significant
digits so that the values read well in ``tuned.yaml`` and on a command line.

**Selection**: per cell, the trial with the highest mean *validation* accuracy over its seeds
(at the checkpoint the ``selection`` rule picks: ``last`` or ``best_valid``); a test metric is
never read. Ties keep the earlier trial (the official configuration first).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from debias_bench.config.hparams import HParam
from debias_bench.config.run_config import RunRequest, method_hparams, method_yaml, resolve_layers
from debias_bench.data.facts import dataset_recipe, valid_split
from debias_bench.errors import ConfigError

if TYPE_CHECKING:  # optuna is imported only when a search samples
    from optuna.distributions import BaseDistribution

#: the distributions a ``search:`` entry may name
DISTRIBUTIONS = ("log_uniform", "uniform", "int", "choice")
#: checkpoints whose validation accuracy may choose the winner (never ``best_test``)
TUNE_SELECTIONS = ("best_valid", "last")
#: significant digits kept of a sampled float
DIGITS = 4
TUNED_FILE = "tuned.yaml"
FORMAT_VERSION = 1


def valid_split_note(dataset: str) -> str:
    """One line saying what ``dataset``'s validation split is (``DatasetFamily.valid_split``)."""
    return valid_split(dataset) or "the dataset's own valid split"


# ------------------------------------------------------------------------- search spaces
def _distribution(key: str, spec: Any, param: HParam, where: str) -> BaseDistribution:
    """``{log_uniform: [low, high]}`` (and uniform, int, choice) as an Optuna distribution,
    checked against the key's declaration."""
    from optuna.distributions import (
        CategoricalDistribution,
        FloatDistribution,
        IntDistribution,
    )

    here = f"{where}: {key}"
    if not (isinstance(spec, dict) and len(spec) == 1 and next(iter(spec)) in DISTRIBUTIONS):
        raise ConfigError(
            f"{here}: {spec!r} is not a distribution",
            hint="one of {log_uniform: [low, high]}, {uniform: [low, high]}, {int: [low, high]}, "
            "{choice: [a, b, ...]}",
        )
    ((name, args),) = spec.items()
    if not isinstance(args, list) or not args:
        raise ConfigError(f"{here}: {name} takes a list, e.g. {name}: [a, b]")
    values = [param.parse(v, here) for v in args]
    if name == "choice":
        if param.kind == "ints" or len(set(map(repr, values))) != len(values):
            raise ConfigError(f"{here}: choice needs distinct single values ({param.describe()})")
        return CategoricalDistribution(values)
    wanted = "int" if name == "int" else "float"
    if param.kind != wanted or len(values) != 2 or not values[0] < values[1]:
        raise ConfigError(
            f"{here}: {name} needs [low, high] with low < high on a {wanted} key "
            f"({key} is {param.describe()})"
        )
    low, high = values
    if name == "int":
        return IntDistribution(low, high)
    if name == "log_uniform" and low <= 0:
        raise ConfigError(f"{here}: log_uniform needs low > 0")
    return FloatDistribution(low, high, log=name == "log_uniform")


def search_specs(method: str, dataset: str) -> dict[str, Any]:
    """The searched keys of ``method`` on ``dataset`` in the YAML form
    (``{log_uniform: [low, high]}``), sorted by key: each declaration's ``search``, then the YAML
    ``search:`` block's ``defaults`` and its entry for the dataset (or its recipe); ``null`` there
    drops a key."""
    block = method_yaml(method).get("search") or {}
    where = f"{method}.yaml search"
    if not isinstance(block, dict) or set(block) - {"defaults", "datasets"}:
        raise ConfigError(f"{where}: only defaults: and datasets: may be given")
    entries = block.get("datasets") or {}
    own = dataset if dataset in entries else dataset_recipe(dataset)
    table = method_hparams(method)
    specs = _declared_specs(method, dataset, table)
    specs.update(block.get("defaults") or {})
    specs.update(entries.get(own) or {})
    unknown = sorted(key for key in specs if key not in table)
    if unknown:
        raise ConfigError(f"{where}: no hyperparameter {unknown[0]!r} in {method}")
    return {key: spec for key, spec in sorted(specs.items()) if spec is not None}


def search_space(
    method: str, dataset: str, specs: dict[str, Any] | None = None
) -> dict[str, BaseDistribution]:
    """The tunable keys of ``method`` on ``dataset`` and their distributions (sorted by key),
    each checked against the key's declaration; ``specs``: :func:`search_specs`, when the
    caller has them."""
    table = method_hparams(method)
    where = f"{method} on {dataset}, search"
    if specs is None:
        specs = search_specs(method, dataset)
    space = {key: _distribution(key, spec, table[key], where) for key, spec in specs.items()}
    if not space:
        raise ConfigError(
            f"{method} has no search space for {dataset}",
            hint=f"declare hparam(..., search=...) on its keys or add a search: block to "
            f"{method}.yaml",
        )
    return space


def _declared_specs(method: str, dataset: str, table: dict[str, HParam]) -> dict[str, Any]:
    """The declarations' spaces as YAML-form specs; a relative one (``Around``) around the value
    of the method's recipe on ``dataset``."""
    searched = {key: param.search for key, param in table.items() if param.search is not None}
    if not searched:
        return {}
    recipe = resolve_layers(RunRequest(method, dataset)).values
    specs = {}
    for key, space in searched.items():
        try:
            specs[key] = space.spec(recipe.get(key))
        except ConfigError as error:
            where = f"{method} on {dataset}, search of {key}"
            raise ConfigError(f"{where}: {error.message}", hint=error.hint) from None
    return specs


# ------------------------------------------------------------------------- sampling
def stream_seed(seed: int, method: str, dataset: str, ratio: float, key: str) -> int:
    """The seed of one hyperparameter's random stream (stable across Python runs)."""
    text = f"{seed}|{method}|{dataset}|{float(ratio):g}|{key}"
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:4], "big")


def _readable(value: Any, dist: BaseDistribution) -> Any:
    """A float rounded to ``DIGITS`` significant digits, kept inside its distribution."""
    low, high = getattr(dist, "low", None), getattr(dist, "high", None)
    if not isinstance(value, float) or low is None or high is None:
        return value
    return min(max(float(f"{value:.{DIGITS}g}"), low), high)


@dataclass
class Trial:
    index: int
    values: dict[str, Any]  # the sampled values; {} for trial 0, the official configuration


class CellSearch:
    """The trials of one method x dataset x ratio: one Optuna study per key (ask-and-tell)."""

    def __init__(
        self,
        method: str,
        dataset: str,
        ratio: float,
        space: dict[str, BaseDistribution],
        seed: int = 0,
    ) -> None:
        import optuna

        optuna.logging.set_verbosity(optuna.logging.WARNING)
        self.space = space
        self.studies = {
            key: optuna.create_study(
                direction="maximize",
                sampler=optuna.samplers.RandomSampler(
                    seed=stream_seed(seed, method, dataset, ratio, key)
                ),
            )
            for key in space
        }
        self._asked: list[dict[str, Any]] = []  # optuna trials of trial 1, 2, ...

    def ask(self, n: int) -> list[Trial]:
        """Trials 0 .. n-1 (trial 0: the official configuration)."""
        while len(self._asked) < n - 1:
            self._asked.append(
                {key: study.ask({key: self.space[key]}) for key, study in self.studies.items()}
            )
        trials = [Trial(0, {})]
        for i, asked in enumerate(self._asked[: max(0, n - 1)], 1):
            values = {k: _readable(t.params[k], self.space[k]) for k, t in asked.items()}
            trials.append(Trial(i, values))
        return trials

    def tell(self, index: int, score: float | None) -> None:
        """Record a trial's validation score (None: it failed) in each key's study."""
        if index == 0:
            return  # not drawn by the samplers
        from optuna.trial import TrialState

        for key, trial in self._asked[index - 1].items():
            if score is None:
                self.studies[key].tell(trial, state=TrialState.FAIL)
            else:
                self.studies[key].tell(trial, score)


# ------------------------------------------------------------------------- selection
def valid_score(result: dict[str, Any] | None, selection: str) -> float | None:
    """Validation accuracy at the checkpoint ``selection`` picks; None for an unfinished run."""
    if selection not in TUNE_SELECTIONS:
        raise ConfigError(f"selection must be one of {', '.join(TUNE_SELECTIONS)}")
    if not result:
        return None
    value = result["selections"][selection]["valid"]["accuracy"]
    return float(value) if value is not None and math.isfinite(value) else None


@dataclass
class Scored:
    """One trial with its runs (one per tuning seed) and their validation scores."""

    trial: Trial
    run_ids: list[str]
    scores: list[float | None]

    @property
    def mean(self) -> float | None:
        """Mean validation accuracy; None unless every seed finished."""
        if not self.scores or any(s is None for s in self.scores):
            return None
        return sum(self.scores) / len(self.scores)  # type: ignore[arg-type]


def choose(scored: list[Scored]) -> Scored | None:
    """The trial with the best mean validation accuracy (earliest on ties); None if none
    finished."""
    finished = [s for s in scored if s.mean is not None]
    if not finished:
        return None
    return max(finished, key=lambda s: (s.mean, -s.trial.index))


# ------------------------------------------------------------------------- tuned.yaml
@dataclass
class TunedCell:
    method: str
    dataset: str
    ratio: float
    hparams: dict[str, Any]  # the winner's values of the searched keys
    trial: int  # the winning trial (0: the official configuration)
    valid_accuracy: float
    #: every trial: {trial, hparams (the searched keys' values), valid_accuracy, runs}
    trials: list[dict[str, Any]] = field(default_factory=list)
    runs: list[str] = field(default_factory=list)  # the winner's reruns on the final seeds


@dataclass
class TunedFile:
    """What ``bench tune`` chose, and how (everything needed to rerun exactly those runs)."""

    protocol: str
    preset: str
    selection: str
    num_trials: int
    tune_seeds: list[int]
    seeds: list[int]
    sampler_seed: int
    fixed: dict[str, Any]  # the --set values every trial and rerun used
    cells: list[TunedCell]
    version: int = FORMAT_VERSION

    def values(self) -> dict[tuple[str, str, float], dict[str, Any]]:
        """(method, dataset, ratio) -> every value to set: the fixed ones, then the winner's."""
        return {(c.method, c.dataset, c.ratio): {**self.fixed, **c.hparams} for c in self.cells}


def write_tuned(path: Path, tuned: TunedFile) -> None:
    """Write ``tuned.yaml`` atomically (a reader never sees half a file)."""
    data = asdict(tuned)
    data = {"version": data.pop("version"), **data}
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".yaml.tmp")
    header = (
        "# Written by `bench tune`: per method x dataset x ratio, the values chosen on\n"
        "# validation accuracy. Rerun them with `bench run --hparams <this file>` (same preset\n"
        "# and protocol).\n"
    )
    tmp.write_text(header + yaml.safe_dump(data, sort_keys=False, width=100))
    tmp.replace(path)


def read_tuned(path: Path | str) -> TunedFile:
    """``tuned.yaml`` back as a :class:`TunedFile`; ConfigError when it is not one."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"no tuned file at {path}", hint="write one with `bench tune --out DIR`")
    try:
        data = yaml.safe_load(path.read_text()) or {}
        if data.get("version") != FORMAT_VERSION:
            raise ValueError(f"version {data.get('version')!r}, expected {FORMAT_VERSION}")
        cells = [TunedCell(**{**c, "ratio": float(c["ratio"])}) for c in data.pop("cells")]
        return TunedFile(**data, cells=cells)
    except (yaml.YAMLError, TypeError, KeyError, ValueError, AttributeError) as exc:
        raise ConfigError(
            f"{path} is not a tuned file of bench tune ({exc})",
            hint="rerun `bench tune` to write it again",
        ) from None


def load_tuned(path: Path | str) -> dict[tuple[str, str, float], dict[str, Any]]:
    """``(method, dataset, ratio) -> {key: value}`` of a ``tuned.yaml``: the values
    ``bench run --hparams`` layers over each run of those cells (see
    ``debias_bench.config.run_config``)."""
    return read_tuned(path).values()
