"""Run records as a tidy DataFrame, and the mean +- std summary table.

The full reporter (LaTeX tables in the paper's layouts, comparison with the paper) builds on
:func:`load_records`, which is a pure read of the run store and works while a sweep runs.
"""

from __future__ import annotations

from typing import Any

import pandas as pd
from tabulate import tabulate

from debias_bench.metrics import SELECTIONS
from debias_bench.registry import METHODS
from debias_bench.store import RunStore

#: Column order of the paper's tables; methods not listed follow in registry order.
PAPER_ORDER = ("vanilla", "lff", "lff_be", "end", "sd", "disent", "selecmix", "etf_debias")
METRICS = ("accuracy", "aligned_accuracy", "conflicting_accuracy", "group_mean_accuracy")
RUN_COLUMNS = ["run_id", "method", "dataset", "ratio", "seed", "protocol", "preset", "state"]


def load_records(store: RunStore) -> pd.DataFrame:
    """One row per (run, selection, split) for finished runs, one row per unfinished run."""
    rows: list[dict[str, Any]] = []
    for run_dir in store.runs():
        config = run_dir.config()
        base = {k: config.get(k) for k in RUN_COLUMNS if k in config}
        base.update(run_id=run_dir.run_id, state=run_dir.effective_state())
        result = run_dir.result()
        if result is None:
            rows.append(
                {**base, "note": run_dir.status().get("error") or run_dir.status().get("reason")}
            )
            continue
        base.update(
            state="done",
            train_time_s=result.get("train_time_s"),
            peak_memory_mb=result.get("peak_memory_mb"),
        )
        for selection, chosen in result["selections"].items():
            for split in ("valid", "test"):
                metrics = chosen[split]
                rows.append(
                    {
                        **base,
                        "selection": selection,
                        "split": split,
                        "step": chosen["step"],
                        **{m: metrics.get(m) for m in METRICS},
                    }
                )
    columns = [*RUN_COLUMNS, "selection", "split", "step", *METRICS]
    return pd.DataFrame(rows, columns=[*columns, "train_time_s", "peak_memory_mb", "note"])


def method_order(names: list[str]) -> list[str]:
    registered = METHODS.names()
    rank = {n: i for i, n in enumerate([*PAPER_ORDER, *registered])}
    return sorted(names, key=lambda n: (rank.get(n, len(rank)), n))


def display_name(method: str) -> str:
    return METHODS.entry(method).display_name if method in METHODS else method


def summary(
    df: pd.DataFrame, selection: str = "last", metric: str = "accuracy", split: str = "test"
) -> pd.DataFrame:
    """mean, std (ddof=1) and n over seeds per (dataset, ratio, protocol, method)."""
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}")
    done = df[(df["state"] == "done") & (df["selection"] == selection) & (df["split"] == split)]
    grouped = done.groupby(["dataset", "ratio", "protocol", "method"])[metric]
    return grouped.agg(mean="mean", std=lambda s: s.std(ddof=1), n="count").reset_index()


def markdown_table(
    df: pd.DataFrame, selection: str = "last", metric: str = "accuracy", split: str = "test"
) -> str:
    """Rows dataset x ratio, columns methods in the paper's order, cells mean +- std (n)."""
    stats = summary(df, selection, metric, split)
    if stats.empty:
        return "(no finished runs yet)"
    methods = method_order(stats["method"].unique().tolist())
    max_n = int(stats["n"].max())
    lines = []
    for protocol, block in stats.groupby("protocol"):
        table = []
        for (dataset, ratio), cells in block.groupby(["dataset", "ratio"]):
            by_method = cells.set_index("method")
            row = [dataset, f"{ratio:g}"]
            for m in methods:
                if m not in by_method.index:
                    row.append("–")
                    continue
                cell = by_method.loc[m]
                std = "" if pd.isna(cell["std"]) else f" ± {cell['std']:.2f}"
                n = f" (n={int(cell['n'])})" if int(cell["n"]) < max_n else ""
                row.append(f"{cell['mean']:.2f}{std}{n}")
            table.append(row)
        headers = ["dataset", "ratio %", *[display_name(m) for m in methods]]
        lines.append(
            f"{split} {metric} (%), selection `{selection}`, protocol `{protocol}`: "
            f"mean ± sample std (ddof=1) over seeds, n={max_n} unless shown\n"
        )
        lines.append(tabulate(table, headers=headers, tablefmt="github"))
    return "\n\n".join(lines)
