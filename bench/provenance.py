"""Where a run's code came from (version, git commit, torch) and what its ``config.json``
holds: the config, its id and that provenance."""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path
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
    """What a run's ``config.json`` holds: the config, its id and the code's provenance."""
    return {**config.to_json(), "run_id": config.run_id, "provenance": provenance()}
