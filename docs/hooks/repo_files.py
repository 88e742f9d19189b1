"""MkDocs hooks (mkdocs.yml ``hooks:``) that let the site build from the repository as it is.

* The API pages' source: the package ``debias_bench`` is assembled from several folders
  (``pyproject.toml``'s ``package-dir``: ``bench/`` is ``debias_bench``, ``methods/`` is
  ``debias_bench.methods``, ...), which mkdocstrings' static reader cannot follow. Before the
  build, ``build/docs-src/debias_bench`` is laid out as that package from symbolic links, and
  mkdocs.yml points the Python handler there. Nothing is imported, so the docs build needs
  neither the package nor torch installed.
* Results the pages show (the reproduction's plot and CSV) are served from where they are
  committed, under ``results/``, rather than copied into ``docs/``.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

from mkdocs.structure.files import File, Files

REPO = Path(__file__).resolve().parents[2]
SOURCE_TREE = REPO / "build" / "docs-src"
#: files of the repository the pages link to, served at the same path under the site
RESULT_FILES = ("results/reproduction/cmnist.png", "results/reproduction/cmnist.csv")


def _package_dirs() -> dict[str, str]:
    """``pyproject.toml``'s ``[tool.setuptools] package-dir``: package -> folder."""
    text = (REPO / "pyproject.toml").read_text(encoding="utf-8")
    try:
        import tomllib
    except ModuleNotFoundError:  # Python 3.10: the one line, read as an inline table
        line = re.search(r"^package-dir\s*=\s*\{(.*)\}\s*$", text, re.MULTILINE)
        assert line, "pyproject.toml has no package-dir"
        return dict(re.findall(r'"([\w.]+)"\s*=\s*"([^"]+)"', line.group(1)))
    return dict(tomllib.loads(text)["tool"]["setuptools"]["package-dir"])


def _lay_out(package: str, folder: Path, root: Path, children: dict[str, str]) -> None:
    """``root/<package path>`` as a folder of links to ``folder``'s entries, with the
    sub-packages mapped elsewhere (``children``: dotted name -> folder) linked in by name."""
    target = root.joinpath(*package.split("."))
    target.mkdir(parents=True)
    mapped_here = {name.rsplit(".", 1)[1]: path for name, path in children.items()}
    for entry in sorted(folder.iterdir()):
        if entry.name == "__pycache__" or entry.name in mapped_here:
            continue
        (target / entry.name).symlink_to(entry)
    for name, path in mapped_here.items():
        (target / name).symlink_to(REPO / path)


def lay_out_source_tree() -> None:
    """``build/docs-src/<package>`` for each top-level package of ``package-dir``."""
    dirs = _package_dirs()
    if SOURCE_TREE.exists():
        shutil.rmtree(SOURCE_TREE)
    SOURCE_TREE.mkdir(parents=True)
    for package in [name for name in dirs if "." not in name]:
        children = {
            name: path
            for name, path in dirs.items()
            if name.startswith(f"{package}.") and name.count(".") == 1
        }
        _lay_out(package, REPO / dirs[package], SOURCE_TREE, children)


# When mkdocs loads this hook, while it reads mkdocs.yml: before any plugin's ``on_config``, and
# mkdocstrings drops search paths that do not exist when it sets its handler up.
lay_out_source_tree()


def on_files(files: Files, config: Any) -> Files:
    for path in RESULT_FILES:
        files.append(File.generated(config, path, abs_src_path=str(REPO / path)))
    return files
