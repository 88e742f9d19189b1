"""A Python process in which ``import torch`` fails: the checks that a command or a module
needs no torch run in it, so they fail whenever it imports torch again."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: a ``sitecustomize`` that makes every ``import torch`` (and its submodules) an ImportError
NO_TORCH = """
import sys


class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == "torch" or name.startswith("torch."):
            raise ImportError(f"torch imported by the test's no-torch environment: {name}")
        return None


sys.meta_path.insert(0, _NoTorch())
"""


def python_without_torch(
    tmp_path: Path, *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    """``python *args`` with torch unimportable and no ``BENCH_PLUGINS`` (built-ins only)."""
    (tmp_path / "sitecustomize.py").write_text(NO_TORCH)
    path = os.pathsep.join([str(tmp_path), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    env.pop("BENCH_PLUGINS", None)
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, env=env, timeout=300, cwd=cwd
    )


def bench_without_torch(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``bench *args`` with torch unimportable."""
    code = "import sys; from debias_bench.cli import main; sys.exit(main(sys.argv[1:]))"
    return python_without_torch(tmp_path, "-c", code, *args)
