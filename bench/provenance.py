"""Where a run's code came from (version, git commit, torch) and what its ``config.json``
holds: the config, its id and that provenance."""

from __future__ import annotations

import ast
import functools
import hashlib
import inspect
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from debias_bench import __version__
from debias_bench.config import RunConfig


def git_commit(here: Path = Path(__file__).parent) -> str | None:
    """The commit of the code: ``git rev-parse`` in a checkout, else the ``COMMIT`` file that
    ``git archive`` fills in (``export-subst``, .gitattributes) for a copy of the code without
    ``.git``, such as a frozen copy running a long reproduction; None when neither tells."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=here,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        pass
    try:
        stamped = (here / "COMMIT").read_text().strip()
    except OSError:
        return None
    return stamped if re.fullmatch(r"[0-9a-f]{40}", stamped) else None


@functools.cache
def provenance() -> dict[str, Any]:
    return {"code_version": __version__, "git_commit": git_commit(), "torch": torch.__version__}


def config_json(config: RunConfig) -> dict[str, Any]:
    """What a run's ``config.json`` holds: the config, its id, the code's provenance and the
    hash of the method's and dataset's code (:func:`code_hash`)."""
    return {
        **config.to_json(),
        "run_id": config.run_id,
        "provenance": provenance(),
        "code": code_hash(config.method, config.dataset),
    }


@functools.cache
def code_hash(method: str, dataset: str) -> str:
    """A hash of the code a run of ``method`` on ``dataset`` executes as theirs: the modules
    that define the method's and the dataset family's classes and their base classes (built-in
    or plugin; the engine's own base classes are the engine's version, in ``provenance``).
    Parsed, so comments, docstrings and formatting do not count."""
    from debias_bench.registry import DATASETS, METHODS

    modules = {
        cls.__module__
        for root in (METHODS.get(method), DATASETS.get(dataset))
        for cls in root.__mro__
        if cls.__module__ not in _ENGINE_MODULES
    }
    digest = hashlib.sha256()
    for name in sorted(modules):
        digest.update(f"{name}\0{_normalized_source(sys.modules[name])}\0".encode())
    return digest.hexdigest()[:16]


#: modules whose classes are the engine's (their changes are versioned with the package)
_ENGINE_MODULES = frozenset({"builtins", "abc", "debias_bench.method", "debias_bench.family"})


def _normalized_source(module: ModuleType) -> str:
    """The module's code without comments, docstrings or layout; its name when it has no
    readable source (a compiled module)."""
    try:
        tree = ast.parse(inspect.getsource(module))
    except (OSError, TypeError, SyntaxError):
        return module.__name__
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (
            isinstance(body, list)
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            del body[0]
            if not body:
                body.append(ast.Pass())
    return ast.dump(tree, include_attributes=False)
