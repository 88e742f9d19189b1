"""What ``amp=auto`` may choose: bf16 on a GPU only for the (dataset, method) cells whose
measured accuracy under bf16 stayed within the float32 seeds' spread (the committed
:data:`PARITY_CSV`, written by ``bench analyze amp``; docs/performance.md shows it)."""

from __future__ import annotations

import csv
import io
from functools import cache
from pathlib import Path

#: the committed measurements (``bench analyze amp --out STORE -o bench/training/amp_parity.csv``)
PARITY_CSV = Path(__file__).resolve().parent / "amp_parity.csv"


def read_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@cache
def bf16_cells(path: Path | None = None) -> frozenset[tuple[str, str]]:
    """The (dataset, method) pairs every measured cell of which keeps its accuracy under bf16
    (in ``path``, default :data:`PARITY_CSV`; none when the file is absent: ``auto`` then
    stays in float32)."""
    path = path or PARITY_CSV
    if not path.is_file():
        return frozenset()
    verdicts: dict[tuple[str, str], set[str]] = {}
    for row in read_rows(path.read_text()):
        verdicts.setdefault((row["dataset"], row["method"]), set()).add(row["keeps"])
    return frozenset(cell for cell, seen in verdicts.items() if seen == {"True"})
