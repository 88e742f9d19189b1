"""A run's terms: the settings beyond its method's own algorithm that change what its number
means, so that two columns of one table are comparable only when they share them.

- **Protocol terms** (:data:`TERMS_KEYS`): what the model is fed and how batches are drawn.
  Under ``official`` the LfF-line MLPs divide Colored MNIST's [0, 1] inputs by 255 a second time
  (``input_div255``); that alone moves Vanilla by tens of points. A method that declares none of
  these keys (no YAML layer names it, its params class does not redeclare it: a plugin written
  from the docs) gets the values of the protocol's reference method (:data:`REFERENCE_METHOD`,
  Vanilla), so that it is trained on the baselines' terms by default; ``bench config`` shows
  the layer as ``protocol official (terms of vanilla)``. A method whose official code differs
  declares its own value in its YAML (GroupDRO, JTT, PGD and DeNetDM feed [0, 1] inputs).
- **Off-recipe values**: every value given by ``--epochs``, tuned values or ``--set``.

:func:`run_terms` reads them from a run's recorded config (``hparams`` and ``sources``), so
older stores are read the same way; the engine also records them in ``result.json``
(``terms``). The reporter marks the columns of a table whose terms differ from the others'
(:mod:`debias_bench.reporting.terms`), and ``bench run`` says so before it starts.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from debias_bench.config.run_config import OFF_RECIPE_LAYERS, REFERENCE_METHOD, RunConfig
from debias_bench.config.sampling import SAMPLING_KEY, sampling_variant, variant_key

#: engine or method keys whose value changes what a method's number means beyond its own
#: algorithm: the input scaling the official MLPs apply (a term where the backbone is the MLP,
#: the only network that reads it), and how batches are drawn (a term where it differs from the
#: method's declared default: ``GroupDRO [sampling=loss_weights]``)
TERMS_KEYS = ("input_div255", "sampling")

#: the name of the off-recipe entry in a run's terms
OFF_RECIPE = "off recipe"


def _text(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, list | tuple):
        return "[" + ",".join(_text(v) for v in value) + "]"
    return str(value)


def run_terms(config: Mapping[str, Any]) -> dict[str, str]:
    """``{"input_div255": "true", "off recipe": "lr=0.01"}``: a run's terms from its recorded
    config (``hparams``, ``sources``), as text, so that they compare and print alike."""
    hparams = config.get("hparams") or {}
    sources = config.get("sources") or {}
    terms = {}
    if hparams.get("backbone") == "mlp" and "input_div255" in hparams:  # only the MLP reads it
        terms["input_div255"] = _text(hparams["input_div255"])
    if sampling_variant(str(config.get("method")), hparams):  # the method's own: not a term
        terms[SAMPLING_KEY] = _text(hparams[SAMPLING_KEY])
    off = [
        f"{key}={_text(hparams[key])}"
        for key in sorted(hparams)
        if sources.get(key) in OFF_RECIPE_LAYERS
    ]
    if off:
        terms[OFF_RECIPE] = ", ".join(off)
    return terms


def describe(terms: Mapping[str, str]) -> str:
    """``input_div255=false; off recipe: lr=0.01`` (``none`` when empty)."""
    parts = [
        f"{OFF_RECIPE}: {value}" if key == OFF_RECIPE else f"{key}={value}"
        for key, value in sorted(terms.items())
    ]
    return "; ".join(parts) or "none"


@dataclass(frozen=True)
class TermsDifference:
    """A method whose runs on a dataset were trained on other terms than the reference's."""

    dataset: str
    method: str
    terms: str  # :func:`describe` of its terms
    reference: str  # the method it is compared with
    reference_terms: str


def differences(
    terms: Mapping[tuple[str, str], Iterable[Mapping[str, str]]], protocol: str | None
) -> list[TermsDifference]:
    """The (dataset, method) pairs of ``terms`` (each pair: the terms of its runs) whose terms
    differ from the reference's on the same dataset: the protocol's reference method
    (:data:`REFERENCE_METHOD`) when it ran there, else the terms most methods share."""
    by_dataset: dict[str, dict[str, str]] = {}
    for (dataset, method), runs in terms.items():
        text = " | ".join(sorted({describe(t) for t in runs}))
        by_dataset.setdefault(dataset, {})[method] = text
    found = []
    for dataset, methods in by_dataset.items():
        reference = REFERENCE_METHOD.get(protocol or "")
        if reference not in methods:
            common = Counter(methods.values()).most_common(1)[0][0]
            reference = next(m for m, text in methods.items() if text == common)
        expected = methods[reference]
        found += [
            TermsDifference(dataset, method, text, reference, expected)
            for method, text in methods.items()
            if text != expected
        ]
    return found


def sweep_note(configs: Iterable[RunConfig]) -> str | None:
    """One line naming the methods of a sweep whose terms differ from the others' on a dataset
    (``bench run`` prints it before it starts), None when they share them."""
    terms: dict[tuple[str, str], list[dict[str, str]]] = {}
    protocols = set()
    for config in configs:
        key = (config.dataset, variant_key(config.method, config.hparams))
        terms.setdefault(key, []).append(run_terms(config.to_json()))
        protocols.add(config.protocol)
    found = differences(terms, next(iter(protocols)) if len(protocols) == 1 else None)
    if not found:
        return None
    each = "; ".join(
        f"{d.method} on {d.dataset}: {d.terms} ({d.reference}: {d.reference_terms})" for d in found
    )
    return (
        f"trained on other terms than the rest of the sweep, marked in every table: {each} "
        "(bench config METHOD DATASET shows where each value comes from)"
    )
