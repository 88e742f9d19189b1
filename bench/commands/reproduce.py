"""`bench reproduce export | table`: the committed reproduction against the paper.

    bench reproduce export --out RUNSTORE --dataset cmnist -o results/reproduction/cmnist.csv
    bench reproduce table results/reproduction/cmnist.csv [--readme results/reproduction/README.md]

``export`` only reads the run store (safe while a sweep writes to it). ``table`` prints the
comparison with the paper and, with ``--readme``, writes the generated README beside the CSV.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from debias_bench.reporting.plots import plot_reproduction
from debias_bench.reproduction import (
    caption,
    compare_frame,
    export_frame,
    load_explanations,
    merge_frames,
    read_csv,
    reason_notes,
    render_readme,
    render_table,
    write_csv,
)
from debias_bench.store import RunStore

DEFAULT_EXPLANATIONS = Path("results/reproduction/explanations.yaml")


def cmd_export(args: argparse.Namespace) -> int:
    store = Path(args.out).expanduser()
    if not store.is_dir():
        print(f"error: no run store at {store}", file=sys.stderr)
        return 2
    frame, unfinished = export_frame(RunStore(store), args.dataset)
    runs = frame[["method", "ratio", "seed", "protocol", "preset"]].drop_duplicates()
    added = f"{len(frame)} rows from {len(runs)} done runs"
    if args.merge and Path(args.output).is_file():
        frame = merge_frames(read_csv(Path(args.output)), frame)
        added += f" merged into its {len(frame)} rows"
    write_csv(frame, Path(args.output))
    print(f"wrote {args.output}: {added}", file=sys.stderr)
    for run_id in unfinished:
        print(f"  not done: {run_id}", file=sys.stderr)
    return 0


def cmd_table(args: argparse.Namespace) -> int:
    csv = Path(args.csv)
    frame = read_csv(csv)
    explanations = load_explanations(Path(args.explanations) if args.explanations else None)
    selection, protocol, preset = args.selection, args.protocol, args.preset
    cells = compare_frame(
        frame, args.dataset, selection, protocol, preset, explanations=explanations
    )
    print(caption(frame, args.dataset, selection, protocol, preset))
    print()
    print(render_table(cells, numbered=args.numbered))
    if args.numbered:
        for k, text in enumerate(reason_notes(cells), 1):
            print(f"\n({k}) {text}")
    if args.plot:
        title = caption(frame, args.dataset, selection, protocol, preset).split(";")[0]
        path = plot_reproduction(
            cells, f"{title}: ours (mean ± std over seeds) and the paper", Path(args.plot)
        )
        print(f"wrote {path}", file=sys.stderr)
    if args.readme:
        text = render_readme(
            frame, cells, args.dataset, selection, protocol, preset, explanations, str(csv)
        )
        Path(args.readme).write_text(text)
        print(f"\nwrote {args.readme}", file=sys.stderr)
    return 0


def add(sub: argparse._SubParsersAction) -> None:
    parser = sub.add_parser(
        "reproduce", help="export finished runs to a CSV and compare it with the paper"
    )
    verbs = parser.add_subparsers(dest="verb", required=True)

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
