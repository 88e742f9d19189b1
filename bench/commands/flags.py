"""Option blocks that several commands share (argparse lives in the command layer only):
each is written once here and added to every parser that takes it."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any, Literal

from debias_bench.config.bounds import MAX_ATTEMPTS_LIMIT, MAX_GRACE_S, MAX_SEED, seconds
from debias_bench.config.hparams import ENGINE_HPARAMS, HParam
from debias_bench.config.run_config import PRESETS, PROTOCOLS
from debias_bench.errors import ConfigError
from debias_bench.launchers.factories import LAUNCHERS, Launchable
from debias_bench.launchers.options import LauncherOption
from debias_bench.launchers.run_one import MAX_ATTEMPTS
from debias_bench.reporting.intervals import (
    ALPHA,
    BOOTSTRAP_SEED,
    INTERVALS,
    RESAMPLES,
    IntervalSpec,
)
from debias_bench.session.execute import Execution
from debias_bench.session.report import interval_spec
from debias_bench.tracking import TRACKERS

from .common import data_args


def interval_of(args: argparse.Namespace, default: str | None = None) -> IntervalSpec | None:
    """The interval the flags ask for (``bench report`` and ``bench compare``)."""
    return interval_spec(
        args.interval, args.alpha, args.bootstrap_resamples, args.bootstrap_seed, default
    )


def add_interval_options(parser: argparse.ArgumentParser, what: str) -> None:
    """``--interval [t|bootstrap]``, ``--alpha``, ``--bootstrap-resamples``, ``--bootstrap-seed``
    (``bench report`` and ``bench compare``)."""
    parser.add_argument(
        "--interval",
        nargs="?",
        const="t",
        choices=INTERVALS,
        help=f"{what} (default t when given without a value: a t-interval; bootstrap: a "
        "percentile bootstrap interval)",
    )
    parser.add_argument(
        "--alpha",
        type=float,
        help=f"level of the tests; the intervals cover 1 - alpha (default {ALPHA})",
    )
    parser.add_argument(
        "--bootstrap-resamples",
        type=int,
        metavar="N",
        help=f"resamples of --interval bootstrap (default {RESAMPLES})",
    )
    parser.add_argument(
        "--bootstrap-seed",
        type=int,
        metavar="S",
        help=f"seed of --interval bootstrap's resampling (default {BOOTSTRAP_SEED})",
    )


# ---------------------------------------------------------------- numeric flags
def number(
    kind: Literal["int", "float"],
    low: float | None = None,
    high: float | None = None,
    low_open: bool = False,
) -> Callable[[str], Any]:
    """An argparse ``type``: a finite ``kind`` within ``[low, high]`` (``low_open``: above
    ``low``); otherwise an error that states the range (argparse names the flag)."""
    param = HParam("value", kind, None, "", low=low, high=high, low_open=low_open)

    def parse(text: str) -> Any:
        try:
            value = param.parse(text.strip(), "")
        except ConfigError:
            raise argparse.ArgumentTypeError(f"must be {param.describe()}, not {text!r}") from None
        return float(value) if kind == "float" else value

    parse.__name__ = kind  # argparse's fallback message: "invalid int value"
    return parse


def hparam_flag(name: str, flag: str) -> Callable[[str], Any]:
    """The argparse ``type`` of ``flag``, which sets the engine hyperparameter ``name``
    (``--epochs``): checked against that key's declaration, as ``--set name=value`` is."""
    param = next(p for p in ENGINE_HPARAMS if p.name == name)

    def parse(text: str) -> Any:
        try:
            return param.parse(text.strip(), flag)
        except ConfigError as exc:
            raise argparse.ArgumentTypeError(
                exc.message.replace(f"={text!r}", f"={text}")
            ) from None

    parse.__name__ = param.kind
    return parse


def duration(text: str) -> float:
    """``--timeout``: ``90`` (seconds), ``30m``, ``2h``; more than 0, at most 30 days."""
    try:
        return seconds(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(exc.message.replace("timeout", "--timeout")) from None


# ---------------------------------------------------------------- how a grid executes
def execution_args(run: argparse.ArgumentParser) -> None:
    """Failures, tracking and where runs execute (the launcher and each launcher's own flags):
    the flags ``execute`` reads (shared by ``bench run`` and ``bench tune``)."""
    fail = run.add_argument_group("failures")
    fail.add_argument("--retry-failed", action="store_true", help="rerun runs that failed")
    fail.add_argument(
        "--max-attempts",
        type=number("int", 1, MAX_ATTEMPTS_LIMIT),
        default=MAX_ATTEMPTS,
        help="give a run up after this many attempts (default %(default)s)",
    )
    fail.add_argument("--fail-fast", action="store_true", help="stop at the first failure")
    fail.add_argument(
        "--timeout",
        type=duration,
        help="stop a run that trains longer than this (seconds, or 30m, 2h); local and slurm",
    )
    fail.add_argument(
        "--grace",
        type=number("float", 0, MAX_GRACE_S),
        default=30.0,
        help="seconds a stopped run gets to checkpoint before SIGKILL (default %(default)s)",
    )

    tracking = run.add_argument_group("experiment tracking")
    tracking.add_argument(
        "--track",
        action="append",
        metavar="KIND[=TARGET]",
        help="send every run to a tracker (repeatable): "
        + "; ".join(f"{e.name}: {e.display_name}" for e in TRACKERS),
    )
    launcher_args(run)


def launcher_args(run: argparse.ArgumentParser) -> None:
    """``--launcher`` with the registered launchers (plugins included: they are imported
    before the parser is built), then a section of flags for each launcher that has some."""
    where = run.add_argument_group("where runs execute")
    where.add_argument(
        "--launcher",
        default="inline",
        choices=LAUNCHERS.names(),
        help="; ".join(f"{e.name}: {e.display_name}" for e in LAUNCHERS),
    )
    where.add_argument(
        "--no-wait",
        action="store_true",
        help="do not wait for runs another live `bench run` holds (they count as not done: "
        "exit 1); slurm: also submit and return (follow with bench status)",
    )
    shared = shared_flags([(entry.name, entry.obj) for entry in LAUNCHERS])
    for entry in LAUNCHERS:
        group = run.add_argument_group(f"--launcher {entry.name}")
        try:
            _declare(entry.obj, group, shared)
        except argparse.ArgumentError as exc:  # a flag name bench (or a launcher) already has
            raise ConfigError(
                f"launcher {entry.name!r} ({entry.obj.__module__}): {exc}",
                hint="give the launcher's option another name",
            ) from None
        except Exception as exc:  # a plugin's own bug: name it, no traceback
            raise ConfigError(
                f"launcher {entry.name!r} ({entry.obj.__module__}) failed to declare its "
                f"flags: {type(exc).__name__}: {exc}",
                hint="fix its options, or remove its plugin from BENCH_PLUGINS",
            ) from None


def _option_type(option: LauncherOption, launcher: str) -> Callable[[str], Any]:
    """The argparse ``type`` of a launcher's option: its own check, as argparse's error."""

    def parse(text: str) -> Any:
        try:
            return option.parse(text, launcher)
        except ConfigError:
            raise argparse.ArgumentTypeError(f"must be {option.describe()}, not {text!r}") from None

    parse.__name__ = option.kind
    return parse


#: flag -> (launcher, its option) of each launcher that declares it
Shared = dict[str, list[tuple[str, LauncherOption]]]


def shared_flags(launchers: list[tuple[str, type[Launchable]]]) -> Shared:
    """The flags that more than one launcher declares (``--cpus-per-run``: slurm's whole
    CPUs, ray's fractions), with each declaration."""
    owners: Shared = {}
    for name, launcher in launchers:
        for option in launcher.options:
            owners.setdefault(option.flag, []).append((name, option))
    return {flag: found for flag, found in owners.items() if len(found) > 1}


def _declare(
    launcher: type[Launchable],
    group: argparse._ArgumentGroup,
    shared: Shared | None = None,
) -> list[str]:
    """The launcher's flags in ``group`` (its declared options; a launcher of the older
    interface declares its own with ``add_arguments``); returns their ``dest`` names. Every
    flag's default is None (not given), so that the sweep can tell which were given.

    A flag in ``shared`` (the launchers that declare it) is added once, by its first
    launcher, as text: the chosen launcher's own declaration checks the value
    (:func:`~debias_bench.launchers.options.launcher_options`, one error naming the option)."""
    before = len(group._group_actions)
    legacy = getattr(launcher, "add_arguments", None)
    if legacy is not None and not launcher.options:
        legacy(group)
    for option in launcher.options:
        owners = (shared or {}).get(option.flag)
        if owners:
            if owners[0][0] == launcher.name:
                group.add_argument(
                    option.flag,
                    dest=option.name,
                    metavar=option.metavar or option.name.upper(),
                    help="; ".join(declared.help for _, declared in owners),
                )
            continue
        group.add_argument(
            option.flag,
            dest=option.name,
            type=_option_type(option, launcher.name),
            choices=option.choices,
            metavar=option.metavar,
            help=option.help,
        )
    return [action.dest for action in group._group_actions[before:]]


def launcher_flags(launcher: type[Launchable]) -> dict[str, Any]:
    """``dest -> (flag, default)`` of a launcher's flags (on a scratch parser): its options'
    (``bench list launchers``, and the check that no other launcher's flag was given)."""
    group = argparse.ArgumentParser(add_help=False).add_argument_group()
    _declare(launcher, group)
    return {a.dest: (a.option_strings[0], a.default) for a in group._group_actions}


def launcher_values(args: argparse.Namespace) -> dict[str, Any]:
    """The options given on the command line for ``--launcher``; a flag of another launcher
    (``--threads`` under inline or slurm) would do nothing: one error naming its launcher."""
    chosen = args.launcher
    own = launcher_flags(LAUNCHERS.get(chosen))
    foreign: dict[str, str] = {}
    for entry in LAUNCHERS:
        if entry.name == chosen:
            continue
        for dest, (flag, default) in launcher_flags(entry.obj).items():
            if dest not in own and getattr(args, dest, default) != default:
                foreign.setdefault(flag, entry.name)
    if foreign:
        owners: dict[str, list[str]] = {}
        for flag, owner in foreign.items():
            owners.setdefault(owner, []).append(flag)
        named = "; ".join(
            f"{', '.join(flags)} {'is a flag' if len(flags) == 1 else 'are flags'} "
            f"of --launcher {owner}"
            for owner, flags in owners.items()
        )
        raise ConfigError(
            f"{named}: --launcher {chosen} does not use {'it' if len(foreign) == 1 else 'them'}",
            hint=f"add --launcher {next(iter(owners))}, or leave out {', '.join(foreign)} "
            "(`bench run --help` lists each launcher's flags under its name)",
        )
    given = {dest: getattr(args, dest, default) for dest, (_, default) in own.items()}
    # checked here, under --dry-run too: a flag that launchers share came as text
    declared = {option.name: option for option in LAUNCHERS.get(chosen).options}
    return {
        dest: declared[dest].parse(value, chosen) if dest in declared else value
        for dest, value in given.items()
        if value is not None
    }


def execution_of(args: argparse.Namespace) -> Execution:
    """How the parsed command line executes its grid (``bench run``, ``bench tune``)."""
    return Execution(
        launcher=args.launcher,
        launcher_options=launcher_values(args),
        device=args.device,
        raw_root=args.raw_root,
        data_root=args.data_root,
        retry_failed=args.retry_failed,
        max_attempts=args.max_attempts,
        fail_fast=args.fail_fast,
        timeout_s=args.timeout,
        grace_s=args.grace,
        track=tuple(args.track or ()),
        no_wait=args.no_wait,
    )


# ---------------------------------------------------------------- how each run is configured
def config_args(run: argparse.ArgumentParser) -> None:
    """How each run of a grid is configured: preset, protocol, overrides, device, data
    (shared by ``bench run`` and ``bench tune``)."""
    run.add_argument("--preset", default="paper", choices=list(PRESETS))
    run.add_argument(
        "--protocol",
        default="official",
        choices=list(PROTOCOLS),
        help="official: keep the official code's quirks; clean: drop them",
    )
    run.add_argument(
        "--epochs", type=hparam_flag("epochs", "--epochs"), help="override the training length"
    )
    run.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override a hyperparameter (repeatable), e.g. --set lr=1e-3",
    )
    run.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    run.add_argument(
        "--data-seed", type=number("int", 0, MAX_SEED), default=0, help="seed of the dataset build"
    )
    run.add_argument(
        "--data-option",
        action="append",
        metavar="KEY=VALUE",
        help="dataset build/read option (repeatable), e.g. corruptions=type0, severity=4, "
        "source=imported; datasets without the option ignore it",
    )
    data_args(run)
