"""The paper's ablations (Fig. 3) as presets: each is a hyperparameter axis added to a grid.

The paper's reference YAML (``results/reference/``, ``ablations:``) declares them; for
ETF-Debias:

* ``alpha``: the weight of the prime reinforcement loss, alpha in {0, 0.2, ..., 1.0} (Fig. 3a);
* ``prime``: simplex-ETF primes against random Gaussian primes of the same dimension (Fig. 3b).

An ablation turns one grid into one grid per value (an ordinary ``--set`` override each), so its
runs go through the normal scheduler, run store and resume, and are identified by their hash
like any other run. :func:`ablation_frame` and :func:`plot_ablation` read them back.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from debias_bench.config.grid import Grid
from debias_bench.config.run_config import RunConfig
from debias_bench.errors import ConfigError, UnknownNameError
from debias_bench.reporting.figures import save_png_pdf
from debias_bench.reporting.paper import reference_data
from debias_bench.runs.store import RunStore


@dataclass(frozen=True)
class Ablation:
    name: str
    param: str
    values: tuple[Any, ...]
    default: Any  # the paper's setting: the other ablations hold this one fixed
    methods: tuple[str, ...]
    title: str


def parse_ablation(name: str, data: dict[str, Any]) -> Ablation:
    """One entry of the reference's ``ablations:``."""
    try:
        return Ablation(
            name=name,
            param=str(data["param"]),
            values=tuple(data["values"]),
            default=data["default"],
            methods=tuple(data["methods"]),
            title=str(data["title"]),
        )
    except (KeyError, TypeError) as err:
        raise ConfigError(
            f"reference ablation {name!r} is malformed ({err})",
            hint="it needs param, values, default, methods and title",
        ) from None


ABLATIONS = {
    name: parse_ablation(name, data)
    for name, data in (reference_data().get("ablations") or {}).items()
}


def get_ablation(name: str) -> Ablation:
    if name not in ABLATIONS:
        raise UnknownNameError(f"unknown ablation {name!r}; valid names: {', '.join(ABLATIONS)}")
    return ABLATIONS[name]


def ablation_grids(ablation: Ablation, grid: Grid) -> list[Grid]:
    """One copy of ``grid`` per value of the ablated parameter, restricted to the methods the
    ablation applies to."""
    methods = [m for m in grid.methods if m in ablation.methods] or list(ablation.methods)
    return [
        dataclasses.replace(
            grid, methods=methods, overrides={**grid.overrides, ablation.param: value}
        )
        for value in ablation.values
    ]


def ablation_frame(
    store: RunStore, ablation: Ablation, selection: str = "last", metric: str = "accuracy"
) -> pd.DataFrame:
    """Finished runs of the ablation: dataset, ratio, value, seed and the test metric.

    A run belongs to it when the other ablated parameters are at their defaults (so the
    random-prime runs are not counted as alpha = 0.8)."""
    others = [a for a in ABLATIONS.values() if a.name != ablation.name]
    rows = []
    for run in store.readable_runs():
        result = run.result()
        if result is None:
            continue
        config = RunConfig.from_json(run.config())
        if config.method not in ablation.methods or ablation.param not in config.hparams:
            continue
        if any(config.hparams.get(o.param, o.default) != o.default for o in others):
            continue
        rows.append({
            "dataset": config.dataset, "ratio": config.ratio, "seed": config.seed,
            "value": config.hparams[ablation.param],
            metric: result["selections"][selection]["test"][metric],
        })  # fmt: skip
    return pd.DataFrame(rows, columns=["dataset", "ratio", "seed", "value", metric])


def plot_ablation(
    frame: pd.DataFrame, ablation: Ablation, output: Path, metric: str = "accuracy"
) -> list[Path]:
    """Mean over seeds with a ±std band (alpha) or bars (prime), one series per dataset."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    stats = frame.groupby(["dataset", "ratio", "value"])[metric].agg(["mean", "std"]).reset_index()
    fig, ax = plt.subplots(figsize=(6, 4))
    series = list(stats.groupby(["dataset", "ratio"]))
    numeric = all(isinstance(v, int | float) for v in stats["value"])
    width = 0.8 / max(len(series), 1)
    for i, ((dataset, ratio), block) in enumerate(series):
        label = f"{dataset} {ratio:g}%"
        std = block["std"].fillna(0)
        if numeric:
            ax.plot(block["value"], block["mean"], marker="o", label=label)
            ax.fill_between(block["value"], block["mean"] - std, block["mean"] + std, alpha=0.2)
        else:
            xs = [list(ablation.values).index(v) + i * width for v in block["value"]]
            ax.bar(xs, block["mean"], width, yerr=std, label=label, capsize=3)
    if not numeric:
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(ablation.values))])
        ax.set_xticklabels([str(v) for v in ablation.values])
    ax.set_xlabel(ablation.param)
    ax.set_ylabel(f"test {metric} (%)")
    ax.set_title(ablation.title, fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return save_png_pdf(fig, output)
