"""The paper's published numbers, shipped in ``results/reference/`` (package data).

One YAML file per paper; cells are ``[mean, std]`` in percent as printed. Keys are the
registry's dataset and method names, so a paper's numbers line up with our runs directly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from debias_bench.errors import ConfigError

DEFAULT_PAPER = "etf_debias_cvpr2024"
#: the repository copy, used when the package data is not installed (an editable checkout)
_REPO_REFERENCE = Path(__file__).resolve().parents[2] / "results" / "reference"

Stat = tuple[float, float]


@dataclass
class PaperNumbers:
    name: str
    source: str
    protocol: str
    statistic: str
    accuracy: dict[tuple[str, float, str], Stat] = field(default_factory=dict)
    per_class: dict[tuple[str, float, str, str], Stat] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def short_source(self) -> str:
        return self.source.split(" (")[0]


def _reference_dir() -> Any:
    try:
        return resources.files("debias_bench.reference")
    except ModuleNotFoundError:
        return _REPO_REFERENCE


def available_papers() -> list[str]:
    return sorted(p.name[:-5] for p in _reference_dir().iterdir() if p.name.endswith(".yaml"))


def _reference_text(name: str) -> str:
    path = _reference_dir().joinpath(f"{name}.yaml")
    if not path.is_file():
        raise ConfigError(
            f"no reference numbers named {name!r}",
            hint=f"available: {', '.join(available_papers()) or 'none'}",
        )
    return path.read_text()


def parse_paper(data: dict[str, Any]) -> PaperNumbers:
    paper = PaperNumbers(
        name=data["paper"],
        source=data["source"],
        protocol=data.get("protocol", "official"),
        statistic=data.get("statistic", ""),
        notes=list(data.get("notes", [])),
    )
    for dataset, ratios in data.get("accuracy", {}).items():
        for ratio, methods in ratios.items():
            for method, (mean, std) in methods.items():
                paper.accuracy[(dataset, float(ratio), method)] = (float(mean), float(std))
    for dataset, ratios in data.get("per_class", {}).items():
        for ratio, methods in ratios.items():
            for method, classes in methods.items():
                for cls, (mean, std) in classes.items():
                    key = (dataset, float(ratio), method, cls)
                    paper.per_class[key] = (float(mean), float(std))
    return paper


def load_paper(name: str = DEFAULT_PAPER) -> PaperNumbers:
    return parse_paper(yaml.safe_load(_reference_text(name)))
