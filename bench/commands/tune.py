"""`bench tune`: the same search budget for every method, chosen on validation, rerun on new seeds.

Per method x dataset x ratio (a *cell*): ``--trials N`` configurations (trial 0 is the method's
own; the others are drawn from its ``search:`` space), each trained on ``--tune-seeds``; the
trial with the best validation accuracy wins, and is rerun on ``--seeds``, which must differ
from the tuning seeds. Trials and reruns are ordinary runs of the run store ``--out``: a rerun
of the same command resumes. ``--out/tuned.yaml`` records the chosen values (``bench run
--hparams``), every trial, and the reruns (``bench report``, ``bench analyze tune``). The
search itself is :mod:`debias_bench.session.tune`; this module is its command line.
"""

from __future__ import annotations

import argparse
import sys

from debias_bench.analysis.tuning import TUNE_SELECTIONS
from debias_bench.config.bounds import MAX_SEED
from debias_bench.config.run_config import parse_overrides
from debias_bench.session.tune import MAX_TRIALS, TuneRequest, tune_grid

from .common import floats, ints
from .flags import config_args, execution_args, execution_of, number


def request_of(args: argparse.Namespace) -> TuneRequest:
    """The search the flags ask for."""
    return TuneRequest(
        methods=args.methods,
        datasets=args.datasets,
        ratios=floats(args.ratios) if args.ratios else None,
        trials=args.trials,
        tune_seeds=tuple(ints(args.tune_seeds)),
        seeds=tuple(ints(args.seeds)),
        selection=args.selection,
        sampler_seed=args.sampler_seed,
        preset=args.preset,
        protocol=args.protocol,
        epochs=args.epochs,
        overrides=parse_overrides(args.set),
        data_seed=args.data_seed,
        data_options=parse_overrides(args.data_option),
    )


def cmd_tune(args: argparse.Namespace) -> int:
    summary = tune_grid(request_of(args), execution_of(args), args.out, dry_run=args.dry_run)
    if summary.finished and summary.tuned is not None:
        print(summary.table())
    for line in summary.lines() if not args.dry_run else []:
        print(line, file=sys.stderr)
    return summary.exit_code


def add(sub: argparse._SubParsersAction) -> None:
    tune = sub.add_parser(
        "tune",
        help="fair tuning: a seeded random search per method, chosen on validation, rerun",
        description=__doc__.split("\n\n", 1)[1] if __doc__ else None,
    )
    tune.add_argument("--methods", default="vanilla,etf_debias", help="comma list or 'all'")
    tune.add_argument("--datasets", default="cmnist", help="comma list or 'all'")
    tune.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's ratios)")
    tune.add_argument(
        "--trials",
        type=number("int", 1, MAX_TRIALS),
        default=10,
        help="configurations per cell, the official one first",
    )
    tune.add_argument("--tune-seeds", default="0", help="training seeds of every trial")
    tune.add_argument(
        "--seeds", default="1,2,3", help="seeds of the winners' reruns (not the tuning seeds)"
    )
    tune.add_argument(
        "--selection",
        default="best_valid",
        choices=TUNE_SELECTIONS,
        help="checkpoint whose validation accuracy ranks the trials (never a test metric)",
    )
    tune.add_argument(
        "--sampler-seed",
        type=number("int", 0, MAX_SEED),
        default=0,
        help="seed of the hyperparameter draws",
    )
    config_args(tune)
    tune.add_argument("--out", required=True, help="run store; tuned.yaml is written there")
    tune.add_argument("--dry-run", action="store_true", help="list the trials and exit")
    execution_args(tune)
    tune.set_defaults(func=cmd_tune)
