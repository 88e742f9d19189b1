"""The ``sampling`` option a method may declare (GroupDRO, JTT, PGD) and the table variants it
makes: a run whose ``sampling`` differs from its method's default is shown as a method of its
own, ``GroupDRO [sampling=loss_weights]`` (:func:`variant_key`). The samplers themselves are
``debias_bench.training.sampling``'s."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from debias_bench.config.hparams import hparam
from debias_bench.config.method_params import method_params
from debias_bench.registry import METHODS

#: the declared option of a method that chooses its sampling (see the module docstring)
SAMPLING_KEY = "sampling"
#: the two values of ``sampling`` that GroupDRO, JTT and PGD declare
RESAMPLE, LOSS_WEIGHTS = "resample", "loss_weights"


def sampling_option(official: str) -> Any:
    """The declaration of a method's ``sampling`` option: ``resample`` (its official sampling,
    described by ``official``; the default) or ``loss_weights``."""
    return hparam(
        RESAMPLE,
        f"how batches are drawn: {RESAMPLE} ({official}) or {LOSS_WEIGHTS} (uniform batches, "
        "the loss weighs the samples)",
        choices=(RESAMPLE, LOSS_WEIGHTS),
    )


def sampling_variant(method: str, hparams: Mapping[str, Any]) -> str | None:
    """``sampling=<value>`` when the run's ``sampling`` differs from its method's declared
    default (a method this process does not know: whenever it has one), else None."""
    value = hparams.get(SAMPLING_KEY)
    if value is None:
        return None
    default = None
    if method in METHODS:
        fields = dataclasses.fields(method_params(method))
        default = next((f.default for f in fields if f.name == SAMPLING_KEY), None)
    return None if value == default else f"{SAMPLING_KEY}={value}"


def variant_key(method: str, hparams: Mapping[str, Any]) -> str:
    """The name a run's method has in tables: ``groupdro``, or ``groupdro[sampling=loss_weights]``
    for a declared variant (registered names hold no ``[``)."""
    variant = sampling_variant(method, hparams)
    return method if variant is None else f"{method}[{variant}]"


def split_variant(key: str) -> tuple[str, str | None]:
    """``groupdro[sampling=loss_weights]`` -> ``("groupdro", "sampling=loss_weights")``."""
    method, bracket, rest = key.partition("[")
    return (method, rest.rstrip("]")) if bracket else (key, None)
