"""Command-line interface: ``bench run | status | report | list | data``."""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from debias_bench import paths
from debias_bench.config import PRESETS, PROTOCOLS, parse_overrides
from debias_bench.engine import DataPlace, Interrupted, Progress, resolve_device
from debias_bench.errors import BenchError, ConfigError
from debias_bench.registry import DATASETS, METHODS
from debias_bench.report import load_records, markdown_table
from debias_bench.store import RunStore
from debias_bench.sweep import Grid, Outcome, expand, run_one
from tabulate import tabulate
from tqdm import tqdm


def _floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of numbers {text!r}", hint="e.g. --ratios 0.5,1,2,5") from None


def _ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of integers {text!r}", hint="e.g. --seeds 0,1,2") from None


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


def _fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def _summary(outcomes: list[Outcome]) -> str:
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
                _fmt(last.get("accuracy")),
                _fmt(last.get("conflicting_accuracy")),
                _fmt(best.get("accuracy")),
                _fmt((o.result or {}).get("train_time_s")),
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
        ratios=_floats(args.ratios) if args.ratios else None,
        seeds=_ints(args.seeds),
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
    print(_summary(outcomes))
    failed = sum(o.state == "failed" for o in outcomes)
    print(
        f"\n{sum(o.ran for o in outcomes)} ran, {failed} failed, "
        f"in {time.perf_counter() - overall:.0f} s; results in {store.root}",
        file=sys.stderr,
    )
    if failed:
        print(f"see the errors with `bench status --out {store.root} --failed`", file=sys.stderr)
    return 1 if failed else 0


def cmd_status(args: argparse.Namespace) -> int:
    store = RunStore(Path(args.out))
    rows, counts = [], {}
    for run_dir in store.runs():
        status, state = run_dir.status(), run_dir.effective_state()
        if run_dir.is_done():
            state = "done"
        counts[state] = counts.get(state, 0) + 1
        if args.failed and state not in ("failed", "dead"):
            continue
        result = run_dir.result() or {}
        last = result.get("selections", {}).get("last", {}).get("test", {})
        progress = f"{status.get('step', 0)}/{status.get('total_steps', '?')}"
        note = status.get("error") or status.get("reason") or ""
        rows.append([run_dir.run_id, state, progress, _fmt(last.get("accuracy")), note[:80]])
        if args.failed and status.get("traceback_tail"):
            rows.append(["", "", "", "", status["traceback_tail"].strip()[-400:]])
    if not rows and not counts:
        print(f"no runs under {store.root}")
        return 0
    print(tabulate(rows, headers=["run", "state", "step", "test acc", "note"], tablefmt="github"))
    print("\n" + ", ".join(f"{n} {s}" for s, n in sorted(counts.items())))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    store = RunStore(Path(args.out))
    df = load_records(store)
    print(markdown_table(df, args.selection, args.metric, args.split))
    unfinished = df[df["state"] != "done"]
    if len(unfinished):
        print("\nnot in the table (unfinished, failed or skipped):")
        for _, row in unfinished.iterrows():
            print(
                f"  {row['run_id']}: {row['state']}" + (f" ({row['note']})" if row["note"] else "")
            )
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    if args.what == "methods":
        rows = [
            [
                e.name,
                e.display_name,
                "yes" if e.meta.get("needs_bias_labels") else "no",
                e.meta.get("cost", ""),
                e.citation,
            ]
            for e in METHODS
        ]
        print(
            tabulate(
                rows,
                headers=["name", "paper name", "bias labels", "cost", "citation"],
                tablefmt="github",
            )
        )
    elif args.what == "datasets":
        rows = []
        for e in DATASETS:
            s = e.obj.spec
            rows.append(
                [
                    e.name,
                    e.display_name,
                    s.num_classes,
                    s.num_biases,
                    ", ".join(f"{r:g}" for r in s.ratios),
                    f"{s.image_size[0]}px",
                    s.backbone,
                    s.test_kind,
                    e.citation,
                ]
            )
        print(
            tabulate(
                rows,
                headers=[
                    "name",
                    "paper name",
                    "classes",
                    "biases",
                    "ratios %",
                    "size",
                    "backbone",
                    "test set",
                    "source",
                ],
                tablefmt="github",
            )
        )
    else:
        for name, values in PRESETS.items():
            print(f"{name:8s} {values or '(method defaults: the official configurations)'}")
    return 0


def cmd_data(args: argparse.Namespace) -> int:
    raw, root = paths.raw_root(args.raw_root), paths.data_root(args.data_root)
    for name in DATASETS.resolve(args.name):
        family = DATASETS.get(name)(raw, root)
        folder = family.prepare(_floats(args.ratios) if args.ratios else None)
        print(f"{name}: prepared in {folder}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="bench", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    def data_args(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--raw-root",
            help="raw downloads/releases (default $BENCH_RAW_ROOT or "
            "~/.cache/debias-bench/raw); never written",
        )
        p.add_argument(
            "--data-root",
            help="prepared datasets (default $BENCH_DATA_ROOT or ~/.cache/debias-bench/data)",
        )

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

    status = sub.add_parser("status", help="states of the runs in a run store")
    status.add_argument("--out", default=str(paths.DEFAULT_OUT))
    status.add_argument("--failed", action="store_true", help="only failures, with errors")
    status.set_defaults(func=cmd_status)

    report = sub.add_parser("report", help="mean ± std table of finished runs")
    report.add_argument("--out", default=str(paths.DEFAULT_OUT))
    report.add_argument("--selection", default="last", choices=["last", "best_valid", "best_test"])
    report.add_argument(
        "--metric",
        default="accuracy",
        choices=["accuracy", "aligned_accuracy", "conflicting_accuracy", "group_mean_accuracy"],
    )
    report.add_argument("--split", default="test", choices=["test", "valid"])
    report.set_defaults(func=cmd_report)

    lst = sub.add_parser("list", help="registered methods, datasets or presets")
    lst.add_argument("what", choices=["methods", "datasets", "presets"])
    lst.set_defaults(func=cmd_list)

    data = sub.add_parser("data", help="prepare datasets")
    data_sub = data.add_subparsers(dest="data_command", required=True)
    prepare = data_sub.add_parser("prepare", help="build a dataset from its raw sources")
    prepare.add_argument("name", help="dataset name, comma list or 'all'")
    prepare.add_argument("--ratios", help="only these ratios (%%)")
    data_args(prepare)
    prepare.set_defaults(func=cmd_data)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except BenchError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
