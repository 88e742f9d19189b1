"""A method's YAML, the file beside its module that holds its recipes (:func:`method_yaml`):
where it is, read and checked once, the name ``bench config`` gives it (:func:`yaml_name`), and
the keys its recipe layers name (:func:`yaml_keys`, which a run's id needs). Resolving a run's
values from its layers is :mod:`debias_bench.config.run_config`."""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any

import yaml

from debias_bench.errors import ConfigError
from debias_bench.registry import METHODS, module_file


@cache
def method_yaml(method: str) -> dict[str, Any]:
    """The YAML beside a method's module: ``<module>.yaml`` in the module's folder
    (``methods/lff.yaml``; for a plugin, ``my_methods.yaml`` beside ``my_methods.py``), or,
    for a plugin module that defines several methods, ``<method name>.yaml`` there; empty when
    there is none."""
    path = _yaml_beside(method)
    if path is None:
        return {}
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must be a mapping with defaults, datasets, ... at the top")
    unknown = set(data) - {"defaults", "datasets", "protocols", "presets", "search"}
    if unknown:
        raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown)}")
    return data


def yaml_name(method: str) -> str:
    """The file name of the method's YAML as ``bench config`` names its layers (``lsrw.yaml``
    for a plugin module's), ``<method>.yaml`` when it has none."""
    path = _yaml_beside(method)
    return path.name if path is not None else f"{method}.yaml"


def _yaml_beside(method: str) -> Path | None:
    source = module_file(METHODS.entry(method).module)  # the trainer's, not imported here
    if source is None:
        return None
    for candidate in (source.with_suffix(".yaml"), source.with_name(f"{method}.yaml")):
        if candidate.is_file():
            return candidate
    return None


@cache
def yaml_keys(method: str) -> frozenset[str]:
    """Every key the method's YAML names in a layer of its recipe (``defaults``, ``datasets``,
    ``protocols`` and their ``ratios``), not in a preset's: ``RunConfig.identity`` needs it. A
    preset's layer names keys for its own runs only, so naming a key there (DeNetDM's
    ``image_size`` under ``smoke``) must not move the ids of every other run of the method."""
    doc = method_yaml(method)
    keys: set[str] = set()

    def collect(layer: dict[str, Any] | None) -> None:
        for key, value in (layer or {}).items():
            if key == "ratios":
                for sub in (value or {}).values():
                    collect(sub)
            elif key != "presets":
                keys.add(key)

    collect(doc.get("defaults"))
    for table in ("datasets", "protocols"):
        for layer in (doc.get(table) or {}).values():
            collect(layer)
    return frozenset(keys)
