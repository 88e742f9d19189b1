"""What ``amp=auto`` may choose: bf16 on a GPU only for the (dataset, method) cells whose
measured accuracy under bf16 stayed within the float32 seeds' spread (the committed
:data:`PARITY_CSV`, written by ``bench analyze amp``; docs/performance.md shows it)."""

from __future__ import annotations

import csv
import io
from functools import cache
from pathlib import Path

#: the committed measurements (``bench analyze amp --out STORE -o bench/config/amp_parity.csv``)
PARITY_CSV = Path(__file__).resolve().parent / "amp_parity.csv"


def read_rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


@cache
def _verdicts(path: Path) -> dict[tuple[str, str], frozenset[str]]:
    """(dataset, method) -> the ``keeps`` verdicts of its measured cells."""
    if not path.is_file():
        return {}
    found: dict[tuple[str, str], set[str]] = {}
    for row in read_rows(path.read_text()):
        found.setdefault((row["dataset"], row["method"]), set()).add(row["keeps"])
    return {cell: frozenset(seen) for cell, seen in found.items()}


def bf16_cells(path: Path | None = None) -> frozenset[tuple[str, str]]:
    """The (dataset, method) pairs every measured cell of which keeps its accuracy under bf16
    (in ``path``, default :data:`PARITY_CSV`; none when the file is absent: ``auto`` then
    stays in float32)."""
    verdicts = _verdicts(path or PARITY_CSV)
    return frozenset(cell for cell, seen in verdicts.items() if seen == {"True"})


def bf16_loss_note(dataset: str, method: str, path: Path | None = None) -> str | None:
    """A note for a grid that asks for ``amp=bf16`` where bf16 was measured to lose accuracy
    beyond the float32 seeds' spread (docs/performance.md); None elsewhere."""
    if "False" not in _verdicts(path or PARITY_CSV).get((dataset, method), frozenset()):
        return None
    return (
        f"{method} on {dataset} under amp=bf16: measured to lose accuracy beyond the float32 "
        "seeds' spread (docs/performance.md, bf16 against float32); drop `--set amp=bf16` "
        "(or use amp=auto, which keeps it in float32) for numbers comparable with float32 runs"
    )
