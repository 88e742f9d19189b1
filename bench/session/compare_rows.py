"""The lines of a comparison (``bench compare``): one per cell and method B, with the
difference, its interval, the test, the p-values, the seeds a test needs, and, with the
paper's numbers, whether its claim holds here.
"""

from __future__ import annotations

import math
from typing import Any

from debias_bench.reporting.intervals import IntervalSpec
from debias_bench.reporting.layout import method_name
from debias_bench.reporting.paper import PaperNumbers
from debias_bench.reporting.significance import (
    MAX_SEEDS,
    PAIRED,
    POWER,
    Compared,
    Difference,
    seeds_needed,
)


def _seeds(n: int | None) -> str:
    if n is None:
        return "–"
    return f"> {MAX_SEEDS}" if n > MAX_SEEDS else str(n)


def family_seeds(d: Difference, alpha: float, m: int, power: float) -> int | None:
    """Seeds per method for ``power`` at alpha/m: Holm's first step, so enough for Holm's
    correction over ``m`` tests whatever the other p-values."""
    return seeds_needed(d.effect, d.test == PAIRED, alpha / max(m, 1), power)


def verdict(c: Compared, paper_diff: float | None, alpha: float, needed: int | None) -> str:
    """Whether the paper's claim (the sign of its difference) holds in these runs; where it
    does not yet, the seeds (``needed``, for the whole family) that would tell."""
    d = c.difference
    if paper_diff is None or d is None:
        return "no claim" if paper_diff is None else "untested (n < 2)"
    if paper_diff == 0 or d.diff == 0:
        return "no direction"
    same = math.copysign(1, d.diff) == math.copysign(1, paper_diff)
    if not same:
        return "reversed" + (" (significant)" if d.holds(alpha) else "")
    return "holds" if d.holds(alpha) else f"needs {_seeds(needed)} seeds"


def rows(
    compared: list[Compared],
    blocks: list[tuple[str, str]],
    spec: IntervalSpec,
    paper: PaperNumbers | None,
    a: str,
    power: float = POWER,
    raw: bool = False,
) -> list[dict[str, Any]]:
    """One line per comparison; ``compared``: the whole family (Holm over it). ``raw``: the
    numbers unrounded (CSV), else as printed."""
    m = sum(c.difference is not None for c in compared)

    def num(value: float | None, fmt: str) -> Any:
        return value if raw or value is None else format(value, fmt)

    out = []
    for c, block in zip(compared, blocks, strict=True):
        d = c.difference
        needed = None if d is None else family_seeds(d, spec.alpha, m, power)
        interval = "" if d is None else f"[{d.low:+.2f}, {d.high:+.2f}]"
        row: dict[str, Any] = {
            "protocol": block[0],
            "preset": block[1],
            "dataset": c.dataset,
            **({"ratio": c.ratio} if raw else {"ratio %": f"{c.ratio:g}"}),
            "B": c.other if raw else method_name(c.other),
        }
        if raw:
            row.update(mean_a=c.mean_a, n_a=c.n_a, mean_b=c.mean_b, n_b=c.n_b)
            row.update(low=None if d is None else d.low, high=None if d is None else d.high)
        else:
            row.update({"A (n)": f"{c.mean_a:.2f} ({c.n_a})", "B (n)": f"{c.mean_b:.2f} ({c.n_b})"})
        minus = " - " if raw else " − "  # CSV and DataFrame columns are ASCII
        row[f"A{minus}B"] = num(c.mean_a - c.mean_b, "+.2f")
        if not raw:
            row[f"{spec.level} interval"] = interval
        row.update(
            {
                "test": "none (n < 2)" if d is None else d.test,
                "p": num(None if d is None else d.p, ".3g"),
                "p (Holm)": num(None if d is None else d.p_adjusted, ".3g"),
                "seeds needed": "" if d is None else _seeds(d.seeds_needed),
                f"seeds (alpha/{m})" if raw else f"seeds (α/{m})": (
                    "" if d is None else _seeds(needed)
                ),
            }
        )
        if paper is not None:
            ours = paper.accuracy.get((c.dataset, c.ratio, a))
            theirs = paper.accuracy.get((c.dataset, c.ratio, c.other))
            claim = None if ours is None or theirs is None else ours[0] - theirs[0]
            row[f"paper A{minus}B"] = num(claim, "+.2f")
            row["paper's claim here"] = verdict(c, claim, spec.alpha, needed)
        out.append({k: ("" if v is None and not raw else v) for k, v in row.items()})
    return out
