"""One meaning per cell: which runs share a configuration, and ``--where`` filters.

Two runs are seeds of the same configuration when everything they used but the seed is equal:
the resolved hyperparameters (as the run id hashes them: speed-only settings left out), the data
options, the protocol, the preset and, where both runs recorded one, the prepared data's
fingerprint. A table cell averages the seeds of one configuration only; when the runs of a cell
differ, :func:`check_cells` stops the report and names the keys and a ``--where`` filter.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from collections.abc import Iterable
from typing import Any

import pandas as pd

from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError

#: recorded in config.json but not part of what a run computed
_NOT_CONFIGURATION = ("seed", "run_id", "provenance", "sources", "recipe", "data_fingerprint")
#: prefixes a ``--where`` key may leave out, tried in this order
_SECTIONS = ("hparams", "data_options")
FINGERPRINT = "data_fingerprint"


def _flatten(config: dict[str, Any]) -> dict[str, Any]:
    """``{"hparams": {"lr": 1}}`` -> ``{"hparams.lr": 1}`` (one level: the config's sections)."""
    flat: dict[str, Any] = {}
    for key, value in config.items():
        if isinstance(value, dict):
            flat.update({f"{key}.{k}": v for k, v in value.items()})
        else:
            flat[key] = value
    return flat


def recorded(config: dict[str, Any]) -> dict[str, Any]:
    """Every value the run's config.json records, flattened (what ``--where`` matches)."""
    flat = _flatten(config)
    return {k: v for k, v in flat.items() if k.split(".")[0] not in ("provenance", "sources")}


def identity(config: dict[str, Any]) -> dict[str, Any]:
    """What makes the run's configuration, flattened, seed left out: the run id's hashed
    identity (so settings declared after ids were published compare equal at their default)
    plus the preset."""
    try:
        ident = RunConfig.from_json(config).identity()
    except Exception:  # a method this process does not know (a plugin not loaded): as recorded
        ident = dict(config)
    flat = _flatten({k: v for k, v in ident.items() if k not in _NOT_CONFIGURATION})
    flat["preset"] = config.get("preset")
    return flat


def fingerprint(config: dict[str, Any], result: dict[str, Any] | None) -> str | None:
    """The prepared data's fingerprint the run recorded (result.json, else config.json)."""
    value = (result or {}).get(FINGERPRINT) or config.get(FINGERPRINT)
    return None if value is None else str(value)


# ------------------------------------------------------------------------------- --where
def parse_where(items: Iterable[str]) -> dict[str, str]:
    """``["lr=0.001", "source=imported"]`` -> ``{"lr": "0.001", ...}``."""
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--where {item!r} is not KEY=VALUE", hint="e.g. --where steps=240")
        out[key.strip()] = value.strip()
    return out


def _same(value: Any, wanted: str) -> bool:
    """A recorded value equals a command-line value (numbers by value, ``1e-3 == 0.001``)."""
    if isinstance(value, bool) or wanted.lower() in ("true", "false"):
        return str(value).lower() == wanted.lower()
    if isinstance(value, int | float):
        try:
            return math.isclose(float(value), float(wanted), rel_tol=1e-9, abs_tol=0.0)
        except ValueError:
            return False
    return str(value) == wanted


def _lookup(flat: dict[str, Any], key: str) -> tuple[bool, Any]:
    """(found, value) of a ``--where`` key: ``steps`` is ``hparams.steps`` (else
    ``data_options.steps``, else a top-level key such as ``preset``)."""
    for name in (key, *(f"{section}.{key}" for section in _SECTIONS)):
        if name in flat:
            return True, flat[name]
    return False, None


def apply_where(records: pd.DataFrame, where: dict[str, str]) -> pd.DataFrame:
    """The records of the runs whose config matches every ``key=value``."""
    if not where or records.empty:
        return records
    configs = records["config"].map(lambda c: c if isinstance(c, dict) else {})
    for key, wanted in where.items():
        found = configs.map(lambda c, key=key: _lookup(c, key))
        if not found.map(lambda f: f[0]).any():
            known = sorted({k.split(".", 1)[-1] for c in configs for k in c})
            raise ConfigError(
                f"--where {key}: no run records a value for {key!r}",
                hint=f"keys the runs record: {', '.join(known)}",
            )
        keep = found.map(lambda f, wanted=wanted: f[0] and _same(f[1], wanted))
        records, configs = records[keep], configs[keep]
    return records


# ------------------------------------------------------------------------------- the check
def _short(key: str) -> str:
    """The ``--where`` spelling of a flattened key."""
    head, _, rest = key.partition(".")
    return rest if head in _SECTIONS else key


def differing_keys(identities: list[dict[str, Any]]) -> list[str]:
    keys = sorted({k for ident in identities for k in ident})
    return [k for k in keys if len({repr(i.get(k, "<unset>")) for i in identities}) > 1]


def _values(runs: pd.DataFrame, key: str) -> list[Any]:
    """The runs' values of a flattened key (fingerprints: only the runs that recorded one)."""
    if key == FINGERPRINT:
        return runs[FINGERPRINT].dropna().tolist()
    return [ident.get(key, "<unset>") for ident in runs["identity"]]


def _describe(runs: pd.DataFrame, keys: list[str]) -> tuple[str, str]:
    """The differing keys with their values and run counts, and a filter for the commonest."""
    parts = []
    for key in keys:
        counts = Counter(json.dumps(v, default=str) for v in _values(runs, key))
        listed = "; ".join(f"{v}: {n} run{'s' * (n != 1)}" for v, n in counts.most_common())
        parts.append(f"{_short(key)} ({listed})")
    key = next((k for k in keys if k != FINGERPRINT), keys[0])
    common = Counter(json.dumps(v, default=str) for v in _values(runs, key)).most_common(1)[0][0]
    value = json.loads(common)
    return ", ".join(parts), f"--where {_short(key)}={value}"


def check_cells(runs: pd.DataFrame, keys: list[str], where: str = "") -> None:
    """Stop (ConfigError) when one cell (the runs sharing ``keys``) holds runs of more than
    one configuration: their seeds would be averaged as if they were one."""
    if "identity" not in runs or runs["identity"].isna().all():
        return
    known = runs[runs["identity"].map(lambda i: isinstance(i, dict))]
    for cell, group in known.groupby(keys, sort=True):
        identities = group["identity"].tolist()
        fingerprints = set(group[FINGERPRINT].dropna())
        differ = differing_keys(identities)
        if len(fingerprints) > 1:
            differ.append(FINGERPRINT)
        if not differ:
            continue
        label = ", ".join(str(c) for c in (cell if isinstance(cell, tuple) else (cell,)))
        what, filter_ = _describe(group, differ)
        raise ConfigError(
            f"{label}{where}: {len(group)} runs of different configurations would be averaged "
            f"in one cell; they differ in {what}",
            hint=f"choose one with {filter_} (repeatable), or report them from separate --out "
            "folders",
        )
