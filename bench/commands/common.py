"""Helpers shared by the commands."""

from __future__ import annotations

import argparse
import contextlib
import math
import signal
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Literal

from debias_bench.config.hparams import ENGINE_HPARAMS, HParam, describe_range, in_range
from debias_bench.errors import ConfigError


def floats(text: str) -> list[float]:
    try:
        return [float(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of numbers {text!r}", hint="e.g. --ratios 0.5,1,2,5") from None


def ints(text: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ConfigError(f"bad list of integers {text!r}", hint="e.g. --seeds 0,1,2") from None


def fmt(value: float | None) -> str:
    return "" if value is None else f"{value:.2f}"


def command_with_verbs(
    sub: argparse._SubParsersAction, name: str, help: str, dest: str = "verb"
) -> argparse._SubParsersAction:
    """``bench NAME VERB ...``: a command whose first argument picks one of its verbs, each
    added as a parser to what this returns (``dest`` names the verb in the usage error when
    none is given)."""
    return sub.add_parser(name, help=help).add_subparsers(dest=dest, required=True)


def data_args(p: argparse.ArgumentParser) -> None:
    """--raw-root / --data-root, shared by the commands that touch data."""
    p.add_argument(
        "--raw-root",
        help="raw downloads/releases (default $BENCH_RAW_ROOT or "
        "~/.cache/debias-bench/raw); never written",
    )
    p.add_argument(
        "--data-root",
        help="prepared datasets (default $BENCH_DATA_ROOT or ~/.cache/debias-bench/data)",
    )


# ----------------------------------------------------------------- numeric flags
# Every numeric flag takes its type from here, so a value out of range is one argparse error
# naming the flag and its range (exit 2, no traceback: ``debias_bench.cli``), before anything
# is created, also with --dry-run. The range rule is the hyperparameters' own
# (``debias_bench.config.hparams.in_range``).

#: a seed of torch, NumPy and Python's ``random`` alike
#: (``debias_bench.config.run_config.SEED_RANGE``)
MAX_SEED = 2**32 - 1
#: the longest --timeout anyone means: 30 days
MAX_SECONDS = 30 * 24 * 3600
#: the longest --grace (a stopped run's time to checkpoint): an hour
MAX_GRACE_S = 3600


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
    scale = {"s": 1, "m": 60, "h": 3600}.get(text.strip()[-1:].lower())
    try:
        seconds = float(text.strip()[:-1]) * scale if scale else float(text)
    except ValueError:
        seconds = math.nan
    if not in_range(seconds, 0, MAX_SECONDS, low_open=True):
        raise argparse.ArgumentTypeError(
            f"bad --timeout {text!r}: give seconds, or 30m, 2h "
            f"({describe_range('seconds', 0, MAX_SECONDS, True)})"
        )
    return seconds


@contextlib.contextmanager
def handling(signals: Sequence[int], handler: Any) -> Iterator[None]:
    """Install ``handler`` for ``signals`` for the block, then restore the previous ones."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
