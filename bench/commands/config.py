"""`bench config METHOD DATASET`: every resolved hyperparameter with the layer it came from,
one per line as ``key  value  source`` (like ``git config --show-origin``)."""

from __future__ import annotations

import argparse
import json

from debias_bench.analysis.tuning import search_space, search_specs
from debias_bench.config.grid import resize_note
from debias_bench.config.hparams import SPEED_KEYS
from debias_bench.config.run_config import (
    PRESETS,
    PROTOCOLS,
    RunRequest,
    parse_overrides,
    preset_data_options,
    resolve_layers,
)
from debias_bench.errors import ConfigError
from debias_bench.registry import DATASETS, METHODS


def _value(value: object) -> str:
    return json.dumps(value) if not isinstance(value, str) else value


def cmd_config(args: argparse.Namespace) -> int:
    method = METHODS.resolve(args.method)
    dataset = DATASETS.resolve(args.dataset)
    if len(method) != 1 or len(dataset) != 1:
        raise ConfigError("bench config takes one method and one dataset")
    ratio = args.ratio if args.ratio is not None else DATASETS.get(dataset[0]).spec.ratios[0]
    request = RunRequest(
        method[0],
        dataset[0],
        ratio,
        protocol=args.protocol,
        preset=args.preset,
        epochs=args.epochs,
        overrides=parse_overrides(args.set),
    )
    resolved = resolve_layers(request)
    recipe = f", method settings of {resolved.recipe} (recipe)" if resolved.recipe else ""
    chosen = " (its first ratio; --ratio R for another)" if args.ratio is None else ""
    print(
        f"# {method[0]} on {dataset[0]} at {ratio:g} %{chosen}, protocol {args.protocol}, "
        f"preset {args.preset}{recipe}"
    )
    options = preset_data_options(args.preset, dataset[0])
    if options:
        given = ", ".join(f"{key}={value}" for key, value in options.items())
        print(f"# data options of preset {args.preset} (dataset {dataset[0]}): {given}")
    resized = resize_note(dataset[0], resolved)
    if resized:
        print(f"# {resized}")
    rows = [
        (
            key,
            _value(value) + (" (speed only, not in the run id)" if key in SPEED_KEYS else ""),
            src,
        )
        for key, value, src in resolved.rows()
    ]
    width_key = max(len(r[0]) for r in rows)
    width_value = max(len(r[1]) for r in rows)
    for key, value, source in rows:
        print(f"{key:<{width_key}}  {value:<{width_value}}  {source}")
    searched = search_specs(method[0], dataset[0])
    if searched:
        search_space(method[0], dataset[0], searched)  # each checked against its declaration
        spaces = ", ".join(f"{key} {_space(spec)}" for key, spec in searched.items())
        print(f"# bench tune searches: {spaces}")
    return 0


def _space(spec: dict[str, list[object]]) -> str:
    """``log_uniform 1e-05..0.001``, ``choice etf|onehot|random``."""
    ((name, args),) = spec.items()
    if name == "choice":
        return f"choice {'|'.join(map(str, args))}"
    return f"{name} {args[0]:g}..{args[1]:g}" if len(args) == 2 else f"{name} {args}"


def add(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "config",
        help="show every resolved hyperparameter of METHOD on DATASET and where it comes from",
    )
    p.add_argument("method")
    p.add_argument("dataset")
    p.add_argument("--preset", default="paper", choices=list(PRESETS))
    p.add_argument("--protocol", default="official", choices=list(PROTOCOLS))
    p.add_argument("--ratio", type=float, help="bias-conflicting %% (default: the smallest)")
    p.add_argument("--epochs", type=int)
    p.add_argument("--set", action="append", metavar="KEY=VALUE")
    p.set_defaults(func=cmd_config)
