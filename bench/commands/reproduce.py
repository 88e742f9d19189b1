"""`bench reproduce run | export | table`: the paper's grid, and the reproduction against it.

    bench reproduce run --out RUNSTORE [--tables all] --device cuda --launcher local ...
    bench reproduce export --out RUNSTORE --dataset cmnist -o results/reproduction/cmnist.csv
    bench reproduce table results/reproduction/cmnist.csv [--readme results/reproduction/README.md]

``run`` trains the runs of the paper's tables (every method of the paper on each table's
datasets, at their ratios, seeds 0-2, ``--preset paper``, the paper's protocol) dataset by
dataset, and after each dataset exports its CSV and comparison: one command from an empty store
to the committed files, resumable like ``bench run``. ``export`` only reads the run store (safe
while a sweep writes to it). ``table`` prints the comparison with the paper and, with
``--readme``, writes the generated README beside the CSV.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from debias_bench.errors import ConfigError
from debias_bench.reporting import ReportOptions
from debias_bench.reporting.layout import reference_layout
from debias_bench.reporting.paper import DEFAULT_PAPER
from debias_bench.reporting.plots import plot_reproduction
from debias_bench.reproduction.compare import load_explanations, sections, variants
from debias_bench.reproduction.export import export_frame, merge_frames, read_csv, write_csv
from debias_bench.reproduction.render import (
    VARIANTS_HEADING,
    caption,
    of_methods,
    reason_notes,
    render_readme,
    render_section,
    render_table,
    render_variants,
    tail_note,
)
from debias_bench.runs.jsonio import write_output
from debias_bench.runs.store import RunStore
from debias_bench.session.report import ReportRequest, report_text
from debias_bench.session.run import run_grid

from .common import command_with_verbs, grid_of, printed
from .flags import config_args, execution_args, execution_of

DEFAULT_EXPLANATIONS = Path("results/reproduction/explanations.yaml")


def export(
    store_root: Path, dataset: str | None, output: Path, merge: bool, stale: bool = False
) -> None:
    """Write ``output``: one row per done run (of ``dataset``) and selection; with ``merge``,
    the rows of an existing ``output`` for runs the store does not hold are kept; with
    ``stale``, runs finished by older code of their method or dataset are written too."""
    frame, unfinished = export_frame(RunStore(store_root), dataset, stale=stale)
    runs = frame[["method", "ratio", "seed", "protocol", "preset", "overrides"]].drop_duplicates()
    added = f"{len(frame)} rows from {len(runs)} done runs"
    if merge and output.is_file():
        frame = merge_frames(read_csv(output), frame)
        added += f" merged into its {len(frame)} rows"
    write_csv(frame, output)
    print(f"wrote {output}: {added}", file=sys.stderr)
    for run_id in unfinished:
        print(f"  not done: {run_id}", file=sys.stderr)


def cmd_export(args: argparse.Namespace) -> int:
    store = Path(args.out).expanduser()
    if not store.is_dir():
        print(f"error: no run store at {store}", file=sys.stderr)
        return 2
    export(store, args.dataset, Path(args.output), args.merge, stale=args.stale)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    print(
        comparison(
            Path(args.csv),
            args.dataset,
            (args.selection, args.protocol, args.preset),
            Path(args.explanations) if args.explanations else None,
            readme=Path(args.readme) if args.readme else None,
            plot=Path(args.plot) if args.plot else None,
            numbered=args.numbered,
        )
    )
    return 0


def comparison(
    csv: Path,
    dataset: str,
    rows: tuple[str, str, str],
    explanations_file: Path | None,
    readme: Path | None = None,
    plot: Path | None = None,
    numbered: bool = False,
) -> str:
    """The comparison of ``csv``'s ``rows`` (selection, protocol, preset) with the paper, as
    printed; also writes ``readme`` and the ``plot`` when given."""
    frame = read_csv(csv)
    explanations = load_explanations(explanations_file)
    selection, protocol, preset = rows
    main, *more = sections(frame, dataset, selection, protocol, preset, explanations)
    cells = main.cells
    title = caption(of_methods(frame, cells), dataset, selection, protocol, preset)
    text = f"{title}\n\n{render_table(cells, numbered=numbered)}"
    if dips := tail_note(cells):
        text += f"\n\n{dips}"
    if numbered:
        text += "".join(f"\n\n({k}) {note}" for k, note in enumerate(reason_notes(cells), 1))
    found = variants(frame, dataset, selection, protocol, preset)
    if found:
        text += f"\n\n{VARIANTS_HEADING}:\n\n{render_variants(found)}"
    for section in more:
        text += f"\n\n{render_section(frame, dataset, section, protocol, preset)}"
    if plot:
        heading = f"{title.split(';')[0]}: ours (mean ± std over seeds) and the paper"
        print(f"wrote {plot_reproduction(cells, heading, plot)}", file=sys.stderr)
    if readme:
        write_output(
            readme,
            render_readme(
                frame,
                cells,
                dataset,
                selection,
                protocol,
                preset,
                explanations,
                str(csv),
                more=more,
            ),
            "--readme",
        )
        print(f"wrote {readme}", file=sys.stderr)
    return text


# --------------------------------------------------------------------------- the whole grid
def paper_datasets(tables: str, only: str = "all") -> list[str]:
    """The datasets of the paper's ``tables`` (comma list of ids, or ``all``), in its order;
    ``only`` (a comma list) keeps some of them."""
    layout = reference_layout()
    ids = [t.id for t in layout.tables] if tables == "all" else [t for t in tables.split(",") if t]
    chosen = [layout.table(table_id) for table_id in ids]  # an unknown id: ConfigError
    datasets = [d for d in layout.datasets if any(d in t.datasets for t in chosen)]
    if only == "all":
        return datasets
    wanted = [d.strip() for d in only.split(",") if d.strip()]
    outside = [d for d in wanted if d not in datasets]
    if outside:
        raise ConfigError(
            f"--datasets {','.join(outside)}: not in the tables {tables}",
            hint=f"their datasets: {', '.join(datasets)}",
        )
    return [d for d in datasets if d in wanted]


def cmd_run_grid(args: argparse.Namespace) -> int:
    """Each dataset's grid (``bench run``), then its CSV, comparison and plot; at the end the
    paper's tables with its numbers beside ours. Exit 0 when every run is done."""

    layout = reference_layout()
    methods = ",".join(layout.methods) if args.methods == "paper" else args.methods
    datasets = paper_datasets(args.tables, args.datasets)
    results = Path(args.results)
    status = 0
    for dataset in datasets:
        print(f"== {dataset}: {methods}, seeds {args.seeds}", file=sys.stderr)
        one = argparse.Namespace(**{**vars(args), "methods": methods, "datasets": dataset})
        done = run_grid(grid_of(one), execution_of(one), Path(args.out), dry_run=args.dry_run)
        code = 0 if args.dry_run else printed(done)
        status = max(status, code)
        if args.dry_run:
            continue
        results.mkdir(parents=True, exist_ok=True)
        csv = results / f"{dataset}.csv"
        export(Path(args.out), dataset, csv, merge=True)
        comparison(
            csv,
            dataset,
            ("last", args.protocol, args.preset),
            Path(args.explanations) if Path(args.explanations).is_file() else None,
            readme=results / f"{dataset}.md",
            plot=results / f"{dataset}.png",
            numbered=True,
        )
        if code > 1:  # interrupted (128 + signal): the remaining datasets wait for a rerun
            return code
    if not args.dry_run:
        write_tables(Path(args.out), results / "tables.md", args.protocol, args.preset)
    return status


def write_tables(store: Path, output: Path, protocol: str, preset: str) -> None:
    """``bench report --table all --compare-paper`` of ``store``, as Markdown, to ``output``."""
    request = ReportRequest(
        out=store, paper=DEFAULT_PAPER, protocol=protocol, preset=preset, opts=ReportOptions()
    )
    write_output(output, report_text(request).text, "--results")
    print(f"wrote {output}", file=sys.stderr)


def add_run(verbs: argparse._SubParsersAction) -> None:
    """``bench reproduce run``: ``bench run``'s options, the grid given by the paper's tables."""

    tables = ", ".join(t.id for t in reference_layout().tables)
    run = verbs.add_parser(
        "run",
        help="train the paper's tables (resumable), then export each dataset's CSV and comparison",
    )
    run.add_argument("--out", required=True, help="run store directory")
    run.add_argument("--tables", default="all", help=f"comma list or 'all' of: {tables}")
    run.add_argument(
        "--datasets", default="all", help="only these datasets of the tables (comma list)"
    )
    run.add_argument(
        "--methods", default="paper", help="comma list, 'all', or 'paper' (the paper's methods)"
    )
    run.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's, the paper's)")
    run.add_argument("--seeds", default="0,1,2", help="comma list (the paper: three trials)")
    run.add_argument(
        "--results",
        default=str(DEFAULT_EXPLANATIONS.parent),
        help="folder of <dataset>.csv/.md/.png and tables.md (default %(default)s)",
    )
    run.add_argument(
        "--explanations",
        default=str(DEFAULT_EXPLANATIONS),
        help="YAML of reasons for flagged cells (default %(default)s)",
    )
    run.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    config_args(run)
    execution_args(run)
    run.set_defaults(func=cmd_run_grid, hparams=None, ablation=None)


def add(sub: argparse._SubParsersAction) -> None:
    verbs = command_with_verbs(
        sub, "reproduce", "train the paper's grid, export finished runs, compare with the paper"
    )
    add_run(verbs)

    export = verbs.add_parser("export", help="one CSV row per done run and selection")
    export.add_argument("--out", required=True, help="run store to read (never written)")
    export.add_argument("--dataset", default=None, help="only this dataset's runs")
    export.add_argument("-o", "--output", required=True, help="CSV to write")
    export.add_argument(
        "--merge",
        action="store_true",
        help="keep the rows of an existing --output for runs this store does not hold (a "
        "reproduction spread over the stores of several sessions); the store's rows win",
    )
    export.add_argument(
        "--stale",
        action="store_true",
        help="also write runs that finished under older code of their method or dataset "
        "(their code_version names the commit that trained them); without it they are listed "
        "as not done",
    )
    export.set_defaults(func=cmd_export)

    table = verbs.add_parser("table", help="ours vs the paper, flagged cells with reasons")
    table.add_argument("csv", help="CSV written by `bench reproduce export`")
    table.add_argument("--dataset", default="cmnist")
    table.add_argument("--selection", default="last", help="last | best_valid | best_test")
    table.add_argument("--protocol", default="official")
    table.add_argument("--preset", default="paper")
    table.add_argument(
        "--explanations",
        default=str(DEFAULT_EXPLANATIONS),
        help="YAML of reasons for flagged cells and notes (default %(default)s)",
    )
    table.add_argument("--readme", default=None, help="also write this README (Markdown)")
    table.add_argument(
        "--plot",
        default=None,
        help="also write this PNG: accuracy against ratio, ours and the paper",
    )
    table.add_argument(
        "--numbered", action="store_true", help="reasons as numbered notes under the table"
    )
    table.set_defaults(func=cmd_table)
