"""A method as configuration sees it: its name, metadata and params class, declared apart from
its trainer.

A built-in method's params class and metadata live in ``debias_bench.methods.declared`` and its
trainer in ``debias_bench.methods``: the trainer imports torch, and ``bench list methods``,
``bench config`` and the grid's resolution need only the declaration, so the trainer is
imported when a run first needs it (:meth:`~debias_bench.registry.Registry.declare`). A plugin
registers its trainer class directly (``@register_method``), whose ``Params`` is its params
class."""

from __future__ import annotations

from debias_bench.config.hparams import EngineParams, declarations
from debias_bench.registry import METHODS


def declare_method(
    name: str,
    *,
    trainer: str,
    params: type[EngineParams] = EngineParams,
    display_name: str,
    citation: str,
    needs_bias_labels: bool,
    cost: str,
) -> None:
    """Declare method ``name``, trained by the class at ``trainer`` (``module:Class``, imported
    on first use) with the hyperparameters of ``params``, checked now (each field declared with
    ``hparam()``, of a known kind)."""
    if not (isinstance(params, type) and issubclass(params, EngineParams)):
        raise TypeError(f"method {name!r}: params must extend EngineParams, got {params!r}")
    declarations(params)
    METHODS.declare(
        name,
        trainer,
        display_name=display_name,
        citation=citation,
        params=params,
        needs_bias_labels=needs_bias_labels,
        cost=cost,
    )


def method_params(method: str) -> type[EngineParams]:
    """The params class of ``method``: its declaration's, or a registered trainer's ``Params``
    (a plugin's)."""
    entry = METHODS.entry(method)
    declared: type[EngineParams] | None = entry.meta.get("params")
    return declared if declared is not None else entry.obj.Params
