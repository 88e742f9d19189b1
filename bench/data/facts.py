"""What a dataset declares for the engine, resolved with its recipe (the one place that reads it).

A family declares on its class (``DatasetFamily``): ``presets`` (per preset, the hyperparameter
values and build options it sets), ``train_sizes`` (per ratio, for ``bench perf``) and
``valid_split`` (what its validation split is). A dataset registered with ``recipe="X"``
follows X's method settings:

* a preset's hyperparameter values: X's, then its own class's (base classes first), later
  values winning key by key, so a dataset may override one value of X's and keep the rest;
  both go over the engine-wide values of ``config.PRESETS``;
* a preset's build options: its own class's only (they are options of its family, which X's
  family may declare and it may not);
* training-set sizes and the validation split: its own only (also through a base class that
  is not a registered dataset: ``debias_bench.data.declared``), else none. They are facts about
  its data, not settings: a recipe that lent its sizes once made a 10,000-image set claim
  Colored MNIST's 54,000 in every projection. Unknown, a size leaves the run out of
  ``bench perf --project`` with a note, and a ``run_share`` key that needs it is refused with
  the fix.

"Declares" means a non-empty value: the empty defaults on ``DatasetFamily`` declare nothing.
"""

from __future__ import annotations

from typing import Any

from debias_bench.data.family import DatasetFamily, PresetValues
from debias_bench.data.options import check_data_options, declared_options
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS


def dataset_recipe(dataset: str) -> str | None:
    """The registered dataset whose method settings ``dataset`` follows (``recipe=`` at
    registration), or None."""
    recipe = DATASETS.entry(dataset).meta.get("recipe")
    if recipe is not None and recipe not in DATASETS:
        raise ConfigError(
            f"dataset {dataset!r} declares recipe={recipe!r}, which is not a registered dataset",
            hint=f"registered: {', '.join(DATASETS.names())}",
        )
    return recipe


def _family(dataset: str) -> type[DatasetFamily]:
    family: type[DatasetFamily] = DATASETS.get(dataset)
    return family


def class_preset(family: type[DatasetFamily], preset: str) -> PresetValues:
    """What ``family``'s class and its bases declare for ``preset`` (bases first, merged key by
    key: a subclass may override one value)."""
    hparams: dict[str, Any] = {}
    options: dict[str, Any] = {}
    for klass in reversed(family.__mro__):
        values = vars(klass).get("presets", {}).get(preset)
        if values is not None:
            hparams.update(values.hparams)
            options.update(values.data_options)
    return PresetValues(hparams, options)


def preset_hparams(preset: str, dataset: str) -> list[tuple[str, dict[str, Any]]]:
    """The hyperparameter values ``preset`` sets on ``dataset`` beyond the engine-wide ones, as
    (source label, values) layers, later winning: its recipe's, then its own (empty ones left
    out)."""
    layers = []
    recipe = dataset_recipe(dataset)
    if recipe is not None:
        values = dict(class_preset(_family(recipe), preset).hparams)
        layers.append((f"dataset {recipe}, recipe of {dataset}", values))
    layers.append((f"dataset {dataset}", dict(class_preset(_family(dataset), preset).hparams)))
    return [(label, values) for label, values in layers if values]


def preset_data_options(preset: str, dataset: str) -> dict[str, Any]:
    """The build options ``preset`` sets for ``dataset`` (empty for most): its family's own."""
    return dict(class_preset(_family(dataset), preset).data_options)


def off_recipe_data_options(preset: str, dataset: str, options: dict[str, Any]) -> dict[str, Any]:
    """The options of ``options`` (a run's recorded build options) that build other data than
    ``preset``'s recipe does: a value other than the preset's, or where the preset sets none,
    the option's default. Options that do not change the data (parallel workers) never count;
    a name ``dataset`` does not declare counts (it came from elsewhere)."""
    declared = declared_options(_family(dataset))
    recipe = {name: opt.default for name, opt in declared.items()}
    recipe.update(check_data_options(dataset, preset_data_options(preset, dataset)))
    return {
        key: value
        for key, value in options.items()
        if (key not in declared or declared[key].affects_data) and recipe.get(key) != value
    }


def _declared(dataset: str, attribute: str) -> Any:
    """``attribute`` of ``dataset``'s class when it declares it (never its recipe's); None."""
    return getattr(_family(dataset), attribute) or None


def train_size(dataset: str, ratio: float) -> int | None:
    """Training images of ``dataset`` at ``ratio`` % (None: not declared)."""
    sizes = _declared(dataset, "train_sizes") or {}
    return next((int(n) for r, n in sizes.items() if float(r) == float(ratio)), None)


def valid_split(dataset: str) -> str | None:
    """One line saying what ``dataset``'s validation split is (None: not declared)."""
    note: str | None = _declared(dataset, "valid_split")
    return note
