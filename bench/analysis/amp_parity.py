"""bf16 against float32, measured (issue 51): what ``--set amp=bf16`` costs each method.

Per (dataset, preset, protocol, ratio, method), the runs under ``amp=bf16`` are paired by seed
with the runs of the same cell in full precision (``amp=none``, the default) and their
difference ``bf16 - float32`` is tested with the project's paired t-test and interval
(:func:`~debias_bench.reporting.significance.difference`). A cell *keeps its accuracy* under
bf16 when the mean difference is no worse than minus the float32 seeds' sample standard
deviation: a loss inside the seeds' own spread. ``amp=auto`` chooses bf16 on a GPU for those
cells only (:func:`~debias_bench.config.amp_policy.bf16_cells`).
"""

from __future__ import annotations

import csv
import io
from dataclasses import dataclass

import pandas as pd

from debias_bench.config.amp_policy import PARITY_CSV, read_rows
from debias_bench.reporting.layout import method_name, method_order
from debias_bench.reporting.significance import Difference, Sample, difference
from debias_bench.reporting.stats import seed_stats

__all__ = ["PARITY_CSV", "Parity", "parity", "read_rows", "render_markdown", "to_csv"]
#: what identifies a cell of the table
CELL = ("dataset", "preset", "protocol", "ratio", "method")
FIELDS = (
    *CELL,
    "n",
    "float32",
    "float32_sd",
    "bf16",
    "bf16_sd",
    "diff",
    "low",
    "high",
    "p",
    "keeps",
)


def _sd(sample: Sample) -> float:
    """A sample's seed spread as every table of the project gives it (0 for one seed)."""
    return seed_stats(sample.values.values())[1] or 0.0


@dataclass(frozen=True)
class Parity:
    """One cell: float32 and bf16 over the seeds both ran, and their paired difference."""

    dataset: str
    preset: str
    protocol: str
    ratio: float
    method: str
    full: Sample
    half: Sample
    diff: Difference | None  # None: fewer than 2 shared seeds

    @property
    def spread(self) -> float:
        """The float32 seeds' sample standard deviation (0 for one seed)."""
        return _sd(self.full)

    @property
    def keeps(self) -> bool | None:
        """bf16 loses no more than the float32 seeds' spread (None: not measured)."""
        if self.diff is None:
            return None
        return self.diff.diff >= -self.spread

    def row(self) -> dict[str, object]:
        d = self.diff
        return {
            **{key: getattr(self, key) for key in CELL},
            "n": self.full.n,
            "float32": round(self.full.mean, 2),
            "float32_sd": round(self.spread, 2),
            "bf16": round(self.half.mean, 2),
            "bf16_sd": round(_sd(self.half), 2),
            "diff": None if d is None else round(d.diff, 2),
            "low": None if d is None else round(d.low, 2),
            "high": None if d is None else round(d.high, 2),
            "p": None if d is None else round(d.p, 4),
            "keeps": self.keeps,
        }


def parity(full: pd.DataFrame, half: pd.DataFrame, metric: str = "accuracy") -> list[Parity]:
    """The cells that ran in float32 (``full``) and under bf16 (``half``), each paired over
    the seeds both ran (frames of :func:`debias_bench.results` rows, one per run)."""
    frame = pd.concat([full.assign(amp="none"), half.assign(amp="bf16")], ignore_index=True)
    done = frame.dropna(subset=[metric])
    out = []
    for key, cell in done.groupby(list(CELL), sort=False):
        by = {
            amp: {int(s): float(v) for s, v in zip(rows["seed"], rows[metric], strict=True)}
            for amp, rows in cell.groupby("amp")
        }
        fp32, bf16 = by.get("none", {}), by.get("bf16", {})
        seeds = sorted(set(fp32) & set(bf16))
        if not seeds:
            continue
        dataset, preset, protocol, ratio, method = (str(part) for part in key)
        a, b = Sample({s: bf16[s] for s in seeds}), Sample({s: fp32[s] for s in seeds})
        cells = (str(dataset), str(preset), str(protocol), float(ratio), str(method))
        out.append(Parity(*cells, full=b, half=a, diff=difference(a, b)))
    order = method_order(sorted({p.method for p in out}))
    return sorted(
        out, key=lambda p: (p.dataset, p.preset, p.protocol, p.ratio, order.index(p.method))
    )


def to_csv(cells: list[Parity]) -> str:
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, FIELDS, lineterminator="\n")
    writer.writeheader()
    writer.writerows(cell.row() for cell in cells)
    return buffer.getvalue()


def render_markdown(rows: list[dict[str, str]]) -> str:
    """The table of docs/performance.md, from :func:`to_csv`'s rows."""
    lines = [
        "| dataset | preset | ratio (%) | method | n | float32 | bf16 | bf16 − float32 [95 % CI] "
        "| p (paired t) | keeps accuracy |",
        "|---|---|---:|---|---:|---:|---:|---:|---:|:---:|",
    ]
    for r in rows:
        f = {k: f"{float(r[k]):.2f}" if r[k] else "–" for k in FIELDS[6:13]}
        diff = f"{float(r['diff']):+.2f} [{f['low']}, {f['high']}]" if r["diff"] else "–"
        keeps = {"True": "yes", "False": "**no**"}.get(r["keeps"], "–")
        lines.append(
            f"| {r['dataset']} | {r['preset']} | {float(r['ratio']):g} | "
            f"{method_name(r['method'])} | {r['n']} | {f['float32']} ± {f['float32_sd']} | "
            f"{f['bf16']} ± {f['bf16_sd']} | {diff} | {r['p'] or '–'} | {keeps} |"
        )
    return "\n".join(lines)
