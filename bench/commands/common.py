"""Helpers shared by the commands."""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
from collections.abc import Iterator, Sequence
from typing import Any

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


#: the widest note a table shows (the sweep's summary, ``bench status``): longer ones lose
#: their last clauses, never part of one (``bench status --out DIR --failed`` has them whole)
NOTE_WIDTH = 72
_CLAUSE_END = re.compile(r"(?<=[;:.])\s+")


def short_note(note: str, width: int = NOTE_WIDTH) -> str:
    """The first line of ``note``, shortened to ``width`` at a clause boundary (after ``;``,
    ``:`` or ``.``); ``...`` marks the clauses left out. A first clause longer than ``width``
    is shown whole: a note is never cut inside a clause. A first clause that only introduces
    the next (``stale:``) keeps the next one whole too, so the note still says what it is."""
    line = note.strip().splitlines()[0] if note.strip() else ""
    if len(line) <= width:
        return line
    clauses = _CLAUSE_END.split(line)
    if len(clauses) == 1:
        return line
    kept, rest = clauses[0], clauses[1:]
    if kept.endswith(":"):  # a label: what follows is the note
        kept, rest = f"{kept} {rest[0]}", rest[1:]
    while rest and len(f"{kept} {rest[0]} ...") <= width:
        kept, rest = f"{kept} {rest[0]}", rest[1:]
    return f"{kept.rstrip(';:')} ..." if rest else kept


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


@contextlib.contextmanager
def handling(signals: Sequence[int], handler: Any) -> Iterator[None]:
    """Install ``handler`` for ``signals`` for the block, then restore the previous ones."""
    previous = {sig: signal.signal(sig, handler) for sig in signals}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)
