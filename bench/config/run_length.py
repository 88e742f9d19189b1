"""A run's length in steps, and the step counts that keep their share of it.

A hyperparameter declared ``hparam(..., run_share=True)`` is a step count within the run
(DisEnt's feature-swap start ``curr_step``, its decay period ``lr_decay_step``): its value is for
the recipe's run (the method's YAML up to its ``protocols:``), and a run of another length (a
preset, ``--epochs``, ``--set steps=``) gets the same share of its own, rounded, at least 1
(0 stays 0). A value that a preset layer, a tuned file or ``--set`` gives is kept as given: the
YAML's ``presets:`` overrides the rule where a stage should not follow the run (LfF+BE's
committee keeps 20 steps in a 60-step ``ci`` run, where its share would be one step).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from debias_bench.config.hparams import HParam
from debias_bench.data.facts import train_size
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS


def steps_of(values: Mapping[str, Any], dataset: str, ratio: float | None) -> int | None:
    """Training steps of a run with these resolved values: ``steps`` when set, else ``epochs x
    ceil(training set / batch size)``, the training set being the dataset's declared size
    (``DatasetFamily.train_sizes``; at its first ratio when none is given) cut to
    ``train_limit``; None when neither is known."""
    if values.get("steps"):
        return int(values["steps"])
    if ratio is None:
        ratio = DATASETS.get(dataset).spec.ratios[0]
    size = train_size(dataset, ratio)
    limit = values.get("train_limit")
    if limit:
        size = min(size, int(limit)) if size else int(limit)
    if size is None:
        return None
    return int(values["epochs"]) * math.ceil(size / int(values["batch_size"]))


def scale_to_run(
    table: Mapping[str, HParam],
    values: dict[str, Any],
    sources: dict[str, str],
    recipe: Mapping[str, Any],
    recipe_sources: Mapping[str, str],
    dataset: str,
    ratio: float | None,
) -> None:
    """Rescale, in place, the ``run_share`` keys whose value is still the recipe's to the run's
    length (``values``) from the recipe's (``recipe``); ``sources`` says so."""
    shared = [
        key
        for key, param in table.items()
        if param.run_share and values.get(key) and sources.get(key) == recipe_sources.get(key)
    ]
    if not shared:
        return
    before, after = _lengths(recipe, values, dataset, ratio, shared)
    if before == after:
        return
    unit = "steps" if steps_of(values, dataset, ratio) is not None else "epochs"
    for key in shared:
        values[key] = max(1, round(values[key] * after / before))
        sources[key] += f", scaled to the run ({after:g} of {before:g} {unit})"


def _lengths(
    recipe: Mapping[str, Any],
    values: Mapping[str, Any],
    dataset: str,
    ratio: float | None,
    keys: list[str],
) -> tuple[float, float]:
    """The recipe's and the run's lengths in steps; in epochs where both are counted in epochs
    of the same batches and the dataset declares no size."""
    before, after = steps_of(recipe, dataset, ratio), steps_of(values, dataset, ratio)
    if before is not None and after is not None:
        return before, after
    same_batches = (
        not recipe.get("steps")
        and not values.get("steps")
        and all(recipe.get(k) == values.get(k) for k in ("batch_size", "train_limit"))
    )
    if same_batches:
        return float(recipe["epochs"]), float(values["epochs"])
    raise ConfigError(
        f"{', '.join(keys)} keep their share of the run, but the run's length in steps is unknown "
        f"on {dataset} (it declares no training-set size)",
        hint=f"declare train_sizes on {dataset}'s family, or give {keys[0]} per preset in the "
        "method's YAML (presets.<name>)",
    )
