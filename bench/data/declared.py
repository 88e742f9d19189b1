"""What a registered dataset must declare itself: the facts about its data.

A dataset class states facts about its data on the class: ``spec`` (classes, ratios, image
shape), ``train_sizes`` (training images per ratio: ``bench perf --project`` and ``bench
tune`` size the grid with them) and ``valid_split`` (what its validation split is). A plugin
that subclasses a registered dataset to reuse its builder would otherwise inherit that
dataset's facts: a 10,100-image set then claimed Corrupted CIFAR-10's 45,000 training images
and its validation split, and every projection used them without a word. So a registration
whose class takes one of these from another *registered* dataset is refused, naming the
attribute and what to declare. A base class that is not itself a registered dataset (a
family's builder, such as ``ColourBiasedDigits``) describes what it builds: its values may be
inherited. ``recipe=`` lends a dataset another's method settings only, never these facts
(``debias_bench.data.facts``).
"""

from __future__ import annotations

from typing import Any

from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS

#: attribute -> how to declare it (the error's hint)
DATA_FACTS: dict[str, str] = {
    "spec": "spec = dataclasses.replace(Base.spec, name=..., ratios=..., image_size=(height, "
    "width), ...) with this dataset's own values",
    "train_sizes": "train_sizes = {ratio: training images, ...}, or {} when unknown "
    "(bench perf --project then leaves it out, and a step count that keeps its share of a run "
    "is refused on it)",
    "valid_split": 'valid_split = "what its validation split is", or "" when it has none to '
    "describe",
}


def inherited_from_a_dataset(family: type) -> list[tuple[str, type]]:
    """(attribute, the registered dataset class it comes from) for each fact of
    :data:`DATA_FACTS` that ``family`` takes from another registered dataset."""
    found = []
    for attribute in DATA_FACTS:
        owner = next((k for k in family.__mro__ if attribute in vars(k)), None)
        if owner is not None and owner is not family and DATASETS.registered_as(owner):
            found.append((attribute, owner))
    return found


def refuse_inherited_data_facts(name: str, obj: Any) -> None:
    """Refuse to register ``obj`` as ``name`` when it inherits a fact about another
    registered dataset's data (a check of the dataset registry: ``Registry.add_check``)."""
    if not isinstance(obj, type):
        return
    inherited = inherited_from_a_dataset(obj)
    if not inherited:
        return
    attribute, owner = inherited[0]
    others = ", ".join(a for a, _ in inherited[1:])
    more = f" (and {others})" if others else ""
    raise ConfigError(
        f"dataset {name!r} ({obj.__name__}) inherits {attribute}{more} from the registered "
        f"dataset {DATASETS.registered_as(owner)!r} ({owner.__name__}): a fact about that "
        f"dataset's data, not about {name}'s",
        hint=f"declare it on {obj.__name__}: " + "; ".join(DATA_FACTS[a] for a, _ in inherited),
    )
