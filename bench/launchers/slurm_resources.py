"""What each SLURM job asks for: :class:`Resources`, defaults from the command line and
per-dataset overrides from a ``--resources`` YAML file (:func:`load_resources`), and the
submitit parameters they become (:func:`executor_parameters`)."""

from __future__ import annotations

import re
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

import yaml

from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS


@dataclass(frozen=True)
class Resources:
    """What one run asks SLURM for."""

    partition: str | None = None
    time: str = "60"  # minutes, or [D-]HH:MM[:SS]
    gpus: int = 0
    cpus: int = 1
    mem: str | None = None  # e.g. "8G"; None: the partition's default
    account: str | None = None
    qos: str | None = None
    constraint: str | None = None

    def minutes(self) -> int:
        return time_minutes(self.time)


def time_minutes(text: str | int) -> int:
    """SLURM time syntax -> minutes: ``90``, ``1:30:00``, ``2-00:00:00``, ``30:00`` (mm:ss)."""
    text = str(text).strip()
    match = re.fullmatch(r"(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?", text)
    if not match:
        raise ConfigError(f"bad SLURM time {text!r}", hint="use minutes or [D-]HH:MM:SS")
    days, a, b, c = match.groups()
    if days is None and b is None:
        minutes = int(a)
    elif days is None and c is None:  # MM:SS
        minutes = int(a) + (int(b) > 0)
    else:  # [D-]HH[:MM[:SS]]
        minutes = int(days or 0) * 1440 + int(a) * 60 + int(b or 0) + (int(c or 0) > 0)
    return max(1, minutes)


@dataclass
class ResourceTable:
    default: Resources
    datasets: dict[str, dict[str, Any]]

    def for_dataset(self, dataset: str) -> Resources:
        return replace(self.default, **self.datasets.get(dataset, {}))


_KEYS = {f.name for f in fields(Resources)}


#: resource keys that are counts (the others are strings; ``time`` may also be minutes)
_COUNTS = ("gpus", "cpus")


def _check_keys(where: str, entry: Any) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: expected a mapping of resource keys, not {entry!r}")
    unknown = set(entry) - _KEYS
    if unknown:
        raise ConfigError(
            f"{where}: unknown resource keys {sorted(unknown)}", hint=f"known: {sorted(_KEYS)}"
        )
    for key, value in entry.items():
        if key in _COUNTS and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
            raise ConfigError(f"{where}: {key} must be a whole number >= 0, not {value!r}")
        if key not in _COUNTS and value is not None and not isinstance(value, str | int):
            raise ConfigError(f"{where}: {key} must be a string, not {value!r}")
    return {k: (str(v) if k == "time" else v) for k, v in entry.items()}


def load_resources(path: str | None, overrides: dict[str, Any]) -> ResourceTable:
    """Built-in defaults < the file's ``default:`` < ``overrides`` (command line) < the file's
    ``datasets: {name: {...}}``. Example file::

        default: {partition: gpu, time: "4:00:00", gpus: 1, cpus: 4, mem: 16G}
        datasets:
          cmnist: {gpus: 0, cpus: 2, mem: 4G, time: 30}
          bffhq: {time: "12:00:00"}
    """
    doc: dict[str, Any] = {}
    if path:
        try:
            doc = yaml.safe_load(Path(path).read_text()) or {}
        except OSError as exc:
            raise ConfigError(f"cannot read --resources {path}: {exc}") from exc
        except yaml.YAMLError as exc:
            raise ConfigError(f"--resources {path} is not valid YAML: {exc}") from None
        if not isinstance(doc, dict):
            raise ConfigError(f"--resources {path}: expected keys default: and datasets:")
        unknown = set(doc) - {"default", "datasets"}
        if unknown:
            raise ConfigError(f"{path}: unknown top-level keys {sorted(unknown)}")
        if not isinstance(doc.get("datasets") or {}, dict):
            raise ConfigError(f"{path}: datasets: must map dataset names to resources")
        strangers = set(doc.get("datasets") or {}) - set(DATASETS.names())
        if strangers:
            raise ConfigError(
                f"{path}: unknown dataset(s) {sorted(strangers)} under datasets:",
                hint=f"registered: {', '.join(DATASETS.names())}",
            )
    default = Resources(**_check_keys(f"{path}: default", doc.get("default") or {}))
    default = replace(default, **_check_keys("command line", overrides))
    datasets = {
        name: _check_keys(f"{path}: datasets.{name}", entry or {})
        for name, entry in (doc.get("datasets") or {}).items()
    }
    time_minutes(default.time)
    for entry in datasets.values():
        if "time" in entry:
            time_minutes(entry["time"])
    return ResourceTable(default, datasets)


def executor_parameters(res: Resources, array_parallelism: int, name: str) -> dict[str, Any]:
    """submitit ``update_parameters`` arguments for ``res``."""
    params: dict[str, Any] = {
        "timeout_min": res.minutes(),
        "cpus_per_task": res.cpus,
        "tasks_per_node": 1,
        "nodes": 1,
        "name": name,
        "slurm_array_parallelism": array_parallelism,
        # a preempted job goes back to the queue and resumes from its checkpoint
        "slurm_additional_parameters": {"requeue": True},
    }
    if res.gpus:
        params["gpus_per_node"] = res.gpus
    if res.partition:
        params["slurm_partition"] = res.partition
    if res.mem:
        params["slurm_mem"] = res.mem
    for key in ("account", "qos", "constraint"):
        if getattr(res, key):
            params[f"slurm_{key}"] = getattr(res, key)
    return params
