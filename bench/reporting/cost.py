"""The cost table: wall time per run and peak memory per method, relative to the paper's
baseline (plain training) on the same dataset and device."""

from __future__ import annotations

import pandas as pd

from debias_bench.reporting.layout import (
    bias_marker,
    dataset_name,
    dataset_order,
    method_name,
    method_order,
    reference_layout,
)
from debias_bench.reporting.model import Column, Row, Table
from debias_bench.reporting.runs import (
    block_meta,
    checked_blocks,
    run_table,
    states_by,
    unfinished_notes,
    values_by,
)
from debias_bench.reporting.stats import value_cell
from debias_bench.runs.states import RunState

#: the runs of one (dataset, ratio, method) share one configuration (seeds apart)
KEYS = ["dataset", "ratio", "method"]
#: (record column, row label, digits) of each quantity
COST_QUANTITIES = (
    ("train_time_s", "time / run (s)", 1),
    ("peak_memory_mb", "peak memory (MB)", 0),
)


def cost_table(records: pd.DataFrame) -> list[Table]:
    """Mean wall time per run and peak memory per method, and their ratio to the baseline's.

    Rows are (dataset, device): a CPU run and a GPU run are never compared. A method's mean
    spans its ratios and seeds, so each (dataset, ratio, method) must hold one configuration,
    as in the accuracy tables (:func:`~debias_bench.reporting.runs.checked_blocks`): runs at
    another learning rate or length would be averaged as if they cost the same.
    """
    baseline = reference_layout().baseline
    name = method_name(baseline)
    tables = []
    for protocol, preset, block in checked_blocks(run_table(records), KEYS):
        methods = method_order(block["method"].unique().tolist())
        datasets = dataset_order(block["dataset"].unique().tolist())
        tables.append(
            Table(
                name="cost",
                title=f"Training cost per run, relative to {name} on the same dataset and device",
                caption=(
                    f"Protocol `{protocol}`, preset `{preset}`. Mean over the finished runs (all "
                    "ratios and seeds) of each method; in brackets the ratio to "
                    f"{name}'s mean on the same dataset and device. Time: the engine's "
                    "train_time_s, the training steps plus the method's preparation stage (e.g. "
                    "LfF+BE's bias committee), evaluation excluded. Memory: peak GPU memory "
                    "allocated by torch on CUDA; on CPU the process's peak resident set size, "
                    "which for runs executed one after another in one process includes the "
                    "earlier runs (compare memory on GPU runs)."
                ),
                row_headers=("dataset", "device", "quantity"),
                columns=[Column(m, method_name(m), bias_marker(m)) for m in methods],
                rows=_rows(block, methods, datasets, baseline),
                notes=unfinished_notes(block),
                display={d: dataset_name(d) for d in datasets},
                meta=block_meta(protocol, preset),
            )
        )
    return tables


def _rows(block: pd.DataFrame, methods: list[str], datasets: list[str], baseline: str) -> list[Row]:
    """A row per (dataset, device, quantity); each cell's ratio is to the baseline's mean."""
    done = block[block["state"] == RunState.DONE].copy()
    done["device"] = done["device"].fillna("?").astype(str).str.split(":").str[0]
    rows = []
    for dataset in datasets:
        states = states_by(block[block["dataset"] == dataset], ["method"])
        ddone = done[done["dataset"] == dataset]
        for device in sorted(ddone["device"].unique()) or ["-"]:
            dev = ddone[ddone["device"] == device]
            for column, label, digits in COST_QUANTITIES:
                values = values_by(dev, ["method"], column)
                cells = {
                    m: value_cell(values.get(m, []), states.get(m, []), 0, digits) for m in methods
                }
                ref = cells.get(baseline)
                for c in cells.values():
                    if c.mean is not None and ref is not None and ref.mean:
                        c.ratio = c.mean / ref.mean
                    c.std = None  # the spread over ratios is not a noise estimate
                rows.append(Row((dataset, device, label), cells, "cost", dataset))
    return rows
