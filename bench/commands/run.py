"""`bench run`: train a grid of runs, skipping the ones already done."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from pathlib import Path
from typing import Any

from tabulate import tabulate
from tqdm import tqdm

from debias_bench import paths
from debias_bench.config import PRESETS, PROTOCOLS, parse_overrides
from debias_bench.engine import DataPlace, Interrupted, Progress, resolve_device
from debias_bench.registry import DATASETS, METHODS
from debias_bench.store import RunStore
from debias_bench.sweep import Grid, Outcome, expand, run_one

from .common import data_args, floats, fmt, ints


class CliProgress(Progress):
    """A bar per run on a terminal; on a log (CI, SLURM) a line per evaluation, throttled."""

    def __init__(self, label: str, log_every_s: float = 30.0) -> None:
        self.label, self.log_every_s = label, log_every_s
        self.tty = sys.stderr.isatty()
        self.bar: tqdm | None = None
        self.total, self.last_log = 0, 0.0

    def start(self, run_id: str, total_steps: int, start_step: int) -> None:
        self.total = total_steps
        if self.tty:
            self.bar = tqdm(
                total=total_steps,
                initial=start_step,
                desc=self.label,
                unit="step",
                leave=False,
                dynamic_ncols=True,
            )
        elif start_step:
            print(f"    resuming at step {start_step}/{total_steps}", file=sys.stderr)

    def advance(self, step: int) -> None:
        if self.bar is not None:
            self.bar.update(step - self.bar.n)

    def evaluated(self, record: dict[str, Any]) -> None:
        test = record["test"]
        text = f"test {test['accuracy']:.1f} | confl {test['conflicting_accuracy'] or 0:.1f}"
        if self.bar is not None:
            self.bar.set_postfix_str(text)
        elif time.time() - self.last_log > self.log_every_s or record["step"] == self.total:
            self.last_log = time.time()
            print(
                f"    step {record['step']}/{self.total} (epoch {record['epoch']:.1f}): {text}",
                file=sys.stderr,
                flush=True,
            )

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def summary(outcomes: list[Outcome]) -> str:
    rows = []
    for o in outcomes:
        sel = (o.result or {}).get("selections", {})
        last, best = sel.get("last", {}).get("test", {}), sel.get("best_valid", {}).get("test", {})
        rows.append(
            [
                o.config.method,
                o.config.dataset,
                f"{o.config.ratio:g}",
                o.config.seed,
                o.state,
                fmt(last.get("accuracy")),
                fmt(last.get("conflicting_accuracy")),
                fmt(best.get("accuracy")),
                fmt((o.result or {}).get("train_time_s")),
                o.note[:60],
            ]
        )
    headers = [
        "method",
        "dataset",
        "ratio",
        "seed",
        "state",
        "test acc",
        "conflicting",
        "test acc (best valid)",
        "time s",
        "note",
    ]
    return tabulate(rows, headers=headers, tablefmt="github")


def cmd_run(args: argparse.Namespace) -> int:
    grid = Grid(
        methods=METHODS.resolve(args.methods),
        datasets=DATASETS.resolve(args.datasets),
        ratios=floats(args.ratios) if args.ratios else None,
        seeds=ints(args.seeds),
        protocol=args.protocol,
        preset=args.preset,
        epochs=args.epochs,
        overrides=parse_overrides(args.set),
        data_options={"data_seed": args.data_seed},
    )
    configs, notes = expand(grid)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    store = RunStore(Path(args.out))
    if args.dry_run:
        for c in configs:
            done = "done" if store.run(c.run_id).is_done() else "todo"
            print(f"{done}  {c.run_id}")
        return 0
    place = DataPlace(paths.raw_root(args.raw_root), paths.data_root(args.data_root))
    device = resolve_device(args.device)
    stop = {"signal": None}

    def on_signal(signum: int, _frame: Any) -> None:
        stop["signal"] = signum  # checkpoint at the next step, then exit (SLURM preemption)

    for sig in (signal.SIGTERM, signal.SIGUSR1):
        signal.signal(sig, on_signal)
    todo = sum(not store.run(c.run_id).is_done() for c in configs)
    print(
        f"{len(configs)} runs ({len(configs) - todo} already done) -> {store.root} "
        f"on {device}, preset {args.preset}, protocol {args.protocol}",
        file=sys.stderr,
    )
    outcomes: list[Outcome] = []
    overall = time.perf_counter()
    for i, config in enumerate(configs, 1):
        c = config
        label = f"[{i}/{len(configs)}] {c.dataset} {c.method} r{c.ratio:g} s{c.seed}"
        if not store.run(config.run_id).is_done():
            print(label, file=sys.stderr, flush=True)
        try:
            outcome = run_one(
                config,
                store,
                place,
                device,
                CliProgress(label),
                args.retry_failed,
                should_stop=lambda step: stop["signal"] is not None,
            )
        except Interrupted as exc:
            print(f"interrupted: {exc}", file=sys.stderr)
            return 128 + (stop["signal"] or signal.SIGTERM)
        outcomes.append(outcome)
        if outcome.state == "failed" and outcome.ran:
            print(f"    FAILED: {outcome.note}", file=sys.stderr)
            if args.fail_fast:
                break
    print(summary(outcomes))
    failed = sum(o.state == "failed" for o in outcomes)
    print(
        f"\n{sum(o.ran for o in outcomes)} ran, {failed} failed, "
        f"in {time.perf_counter() - overall:.0f} s; results in {store.root}",
        file=sys.stderr,
    )
    if failed:
        print(f"see the errors with `bench status --out {store.root} --failed`", file=sys.stderr)
    return 1 if failed else 0


def add(sub: argparse._SubParsersAction) -> None:
    run = sub.add_parser("run", help="train a grid of runs (skips the ones already done)")
    run.add_argument("--methods", default="vanilla,etf_debias", help="comma list or 'all'")
    run.add_argument("--datasets", default="cmnist", help="comma list or 'all'")
    run.add_argument("--ratios", help="bias-conflicting %% (default: each dataset's ratios)")
    run.add_argument("--seeds", default="0", help="comma list, e.g. 0,1,2")
    run.add_argument("--preset", default="paper", choices=list(PRESETS))
    run.add_argument(
        "--protocol",
        default="official",
        choices=list(PROTOCOLS),
        help="official: keep the official code's quirks; clean: drop them",
    )
    run.add_argument("--epochs", type=int, help="override the training length")
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable), e.g. --set lr=1e-3",
    )
    run.add_argument("--out", default=str(paths.DEFAULT_OUT), help="run store directory")
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument("--data-seed", type=int, default=0, help="seed of the dataset build")
    run.add_argument("--retry-failed", action="store_true", help="rerun runs that failed")
    run.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    run.add_argument("--dry-run", action="store_true", help="list the runs and exit")
    data_args(run)
    run.set_defaults(func=cmd_run)
