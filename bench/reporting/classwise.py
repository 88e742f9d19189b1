"""Per-class tables (the paper's Tables D.1/D.2 for BAR): one table per ratio of one dataset,
rows the methods, columns the classes and the average (the accuracy of the accuracy table).

Class names come from the registered dataset's ``class_names``; when every name is one of the
classes the paper's table declares, the columns follow the paper's order and keys, so the
paper's numbers line up.
"""

from __future__ import annotations

import pandas as pd

from debias_bench.reporting.captions import caption, note_on_test_sets, ratio_label
from debias_bench.reporting.compare import paper_per_class, paper_rows
from debias_bench.reporting.layout import (
    TableLayout,
    bias_marker,
    dataset_name,
    dataset_spec,
    method_name,
    method_order,
    reference_layout,
    table_of,
)
from debias_bench.reporting.model import TERMS_MARK, Cell, Column, Row, Table
from debias_bench.reporting.options import ReportOptions
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.runs import (
    SeedCells,
    block_meta,
    checked_blocks,
    finished,
    run_table,
    unfinished_notes,
    values_by,
)
from debias_bench.reporting.stats import mark_best
from debias_bench.reporting.terms import terms_differences

#: (index into per_class_accuracy, column key, header) of one class
ClassColumn = tuple[int, str, str]


def _paper_class(name: str, classes: tuple[str, ...]) -> str | None:
    words = name.lower().replace("_", " ").replace("-", " ").split()
    matches = [c for c in classes if c in words]
    return matches[0] if len(matches) == 1 else None


def class_columns(
    dataset: str, num_classes: int, paper_classes: tuple[str, ...] = ()
) -> list[ClassColumn]:
    """The columns of ``dataset``'s classes: in ``paper_classes``' order and keys when each
    registered class name maps onto one of them (``Pole_Vaulting`` -> ``vaulting``), else
    the registered names, else ``class k``."""
    spec = dataset_spec(dataset)
    names = list(getattr(spec, "class_names", ()) or ())
    if len(names) != num_classes:
        return [(k, f"class {k}", f"class {k}") for k in range(num_classes)]
    mapped = [_paper_class(n, paper_classes) for n in names]
    if paper_classes and None not in mapped and len(set(mapped)) == len(mapped):
        index = {paper: k for k, paper in enumerate(mapped)}
        return [(index[c], c, c.capitalize()) for c in paper_classes if c in index]
    return [(k, n, n) for k, n in enumerate(names)]


def _per_class_frame(done: pd.DataFrame) -> pd.DataFrame:
    """One row per (run, class) with that class's accuracy."""
    rows = []
    for _, run in done.iterrows():
        for k, acc in enumerate(run["per_class_accuracy"] or []):
            rows.append({**run.to_dict(), "class_index": k, "class_accuracy": acc})
    return pd.DataFrame(rows)


def _accuracy_label(dataset: str) -> str:
    """The paper's name of the accuracy table that holds ``dataset``'s average."""
    labels = {t.id: t.label for t in reference_layout().tables}
    return labels.get(table_of(dataset)) or "the accuracy table"


def classwise_tables(
    records: pd.DataFrame,
    table: TableLayout,
    opts: ReportOptions,
    paper: PaperNumbers | None = None,
) -> list[Table]:
    """Per-class accuracy of each method on ``table``'s dataset, one table per ratio."""
    (dataset,) = table.datasets
    runs = run_table(records)
    runs = runs[runs["dataset"] == dataset]
    done = finished(records, opts)
    tables = []
    for protocol, preset, block in checked_blocks(runs, ["dataset", "ratio", "method"]):
        bdone = done[done["run_id"].isin(block["run_id"])]
        per_class = _per_class_frame(bdone)
        spec = dataset_spec(dataset)
        num_classes = int(
            getattr(spec, "num_classes", 0)
            or (per_class["class_index"].max() + 1 if len(per_class) else 0)
        )
        columns = class_columns(dataset, num_classes, table.classes)
        for ratio in sorted(block["ratio"].unique()):
            terms = terms_differences(block[block["ratio"] == ratio], protocol)
            rows, max_n = _classwise_rows(
                block[block["ratio"] == ratio],
                bdone[bdone["ratio"] == ratio],
                per_class[per_class["ratio"] == ratio] if len(per_class) else per_class,
                columns,
                opts,
                paper,
                dataset,
                float(ratio),
                {d.method for d in terms},
            )
            metric = opts.metric.replace("_", " ")
            what = (
                f"Class-wise {opts.split} accuracy (%) on {dataset_name(dataset)}, "
                f"bias-conflicting ratio {ratio_label(ratio)}%; Average: {metric} over the whole "
                f"{opts.split} set (the number of {_accuracy_label(dataset)})."
                + note_on_test_sets([dataset], opts.split)
            )
            text = caption(what, protocol, preset, opts, max_n, paper, table.label, terms=terms)
            tables.append(
                Table(
                    name=table.id,
                    title=table.heading(
                        f" on {dataset_name(dataset)}, ratio {ratio_label(ratio)}%"
                    ),
                    caption=text.replace("Best per row", "Best per column"),
                    row_headers=("method", "source") if paper else ("method",),
                    columns=[Column(key, header) for _, key, header in columns]
                    + [Column("average", "Average")],
                    rows=rows,
                    notes=unfinished_notes(block[block["ratio"] == ratio]),
                    separated=("average",),
                    meta=block_meta(protocol, preset, opts),
                )
            )
    return tables


def _classwise_rows(
    runs: pd.DataFrame,
    done: pd.DataFrame,
    per_class: pd.DataFrame,
    columns: list[ClassColumn],
    opts: ReportOptions,
    paper: PaperNumbers | None,
    dataset: str,
    ratio: float,
    other_terms: set[str],
) -> tuple[list[Row], int]:
    """Rows (one per method, plus paper and diff rows) of one class-wise table, and max n;
    the methods in ``other_terms`` carry the terms mark (:mod:`.terms`)."""
    methods = method_order(runs["method"].unique().tolist())
    seeds = SeedCells.of(runs, done, ["method"], opts)
    by_class = (
        values_by(per_class, ["method", "class_index"], "class_accuracy") if len(per_class) else {}
    )
    keys = [key for _, key, _ in columns] + ["average"]
    grid = {
        m: {
            **{key: seeds.cell(m, by_class.get((m, k), [])) for k, key, _ in columns},
            "average": seeds.cell(m),
        }
        for m in methods
    }
    for key in keys:  # bold per column; the bracket only on the average, as in the paper
        mark_best({m: grid[m][key] for m in methods}, opts.ours, gain=key == "average")
    paper_grid = paper_per_class(paper, dataset, ratio, keys, opts) if paper else {}
    rows: list[Row] = []
    for m in methods:
        label = method_name(m) + (f" ({bias_marker(m)})" if bias_marker(m) else "")
        label += f" {TERMS_MARK}" if m in other_terms else ""
        row = Row((label, "ours") if paper else (label,), grid[m], "ours", m)
        rows.append(row)
        if paper is not None:
            shown = {key: paper_grid.get(m, {}).get(key, Cell(missing="")) for key in keys}
            rows += paper_rows((label,), m, row, shown)
    return rows, seeds.max_n
