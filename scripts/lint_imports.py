"""Check the layers contract of pyproject.toml (``[tool.importlinter]``) with import-linter.

import-linter reads a package from its folder, but ``debias_bench`` is assembled from three
folders (pyproject's ``package-dir``: bench/, methods/, datasets/), so the check runs on a
temporary folder of links that lays them out as one package. ``--plant MODULE=IMPORTED`` adds
``import IMPORTED`` to a copy of MODULE first (the test that the check can fail uses it).

    python scripts/lint_imports.py             # exit 0 when every import goes downward
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: the package-dir mapping of pyproject.toml: sub-package -> its folder in the repository
MAPPED = {"methods": "methods", "datasets": "datasets", "reference": "results/reference"}


def layout(into: Path) -> Path:
    """``into/debias_bench``: links to bench/'s entries and to the mapped sub-packages."""
    package = into / "debias_bench"
    package.mkdir()
    for entry in (ROOT / "bench").iterdir():
        if entry.name not in MAPPED and entry.name != "__pycache__":
            (package / entry.name).symlink_to(entry)
    for name, folder in MAPPED.items():
        (package / name).symlink_to(ROOT / folder)
    return package


def plant(package: Path, module: str, imported: str) -> None:
    """Replace the link of ``module`` (``debias_bench.data.contract``) by a copy that imports
    ``imported``; the links of its parent folders become real folders of links."""
    parts = module.split(".")[1:]
    folder = package
    for part in parts[:-1]:
        link = folder / part
        if link.is_symlink():
            target = link.resolve()
            link.unlink()
            link.mkdir()
            for entry in target.iterdir():
                (link / entry.name).symlink_to(entry)
        folder = link
    path = folder / f"{parts[-1]}.py"
    source = path.read_text()
    path.unlink()
    path.write_text(f"{source}\nimport {imported}  # planted\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--plant", metavar="MODULE=IMPORTED")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        package = layout(Path(tmp))
        if args.plant:
            module, imported = args.plant.split("=")
            plant(package, module, imported)
        env = {**os.environ, "PYTHONPATH": tmp}
        lint = shutil.which("lint-imports") or "lint-imports"
        config = str(ROOT / "pyproject.toml")
        return subprocess.run([lint, config, "--no-cache"], env=env, cwd=tmp).returncode


if __name__ == "__main__":
    sys.exit(main())
