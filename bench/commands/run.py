"""`bench run`: train a grid of runs, skipping the ones already done.

The command line of :mod:`debias_bench.session.run` (``debias_bench.run``): it parses the flags
into a grid request and an execution, and prints what the session says (where runs execute is
the launcher's business, :mod:`debias_bench.session.execute`).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from debias_bench import paths
from debias_bench.analysis.ablations import ABLATIONS
from debias_bench.registry import DATASETS, METHODS
from debias_bench.session.run import run_grid

from .common import grid_of, printed
from .flags import config_args, execution_args, execution_of


def cmd_run(args: argparse.Namespace) -> int:
    done = run_grid(grid_of(args), execution_of(args), Path(args.out), dry_run=args.dry_run)
    return 0 if args.dry_run else printed(done)


def add(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="train a grid of runs (skips the ones already done)")
    run.add_argument(
        "--methods",
        default="vanilla,etf_debias",
        help=f"comma list or 'all' of: {', '.join(METHODS.names())}",
    )
    run.add_argument(
        "--datasets",
        default="cmnist",
        help=f"comma list or 'all' of: {', '.join(DATASETS.names())}",
    )
    run.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's ratios)")
    run.add_argument("--seeds", default="0", help="comma list, e.g. 0,1,2")
    run.add_argument(
        "--hparams",
        metavar="TUNED_YAML",
        help="per-cell values chosen by `bench tune` (DIR/tuned.yaml); --set still wins",
    )
    config_args(run)
    run.add_argument("--out", default=str(paths.DEFAULT_OUT), help="run store directory")
    run.add_argument(
        "--ablation",
        choices=list(ABLATIONS),
        help="add the paper's ablation axis: alpha (0..1) or prime (etf, random); "
        "plot with `bench analyze ablation NAME`",
    )
    run.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    execution_args(run)
    run.set_defaults(func=cmd_run)
