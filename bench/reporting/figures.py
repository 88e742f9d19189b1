"""Saving matplotlib figures the way every analysis command does."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def save_png_pdf(fig: Any, output: Path, dpi: int = 150) -> list[Path]:
    """Write ``output`` as .png and .pdf (creating its folder), close the figure, return paths."""
    import matplotlib.pyplot as plt

    output.parent.mkdir(parents=True, exist_ok=True)
    written = []
    for suffix in (".png", ".pdf"):
        path = output.with_suffix(suffix)
        fig.savefig(path, dpi=dpi)
        written.append(path)
    plt.close(fig)
    return written
