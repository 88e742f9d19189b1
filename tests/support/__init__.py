"""What the tests share beside fixtures: a toy dataset, `bench` in a subprocess, the
scripted dataset of the launcher tests, faulty and helper methods, planted run stores.

``tests/`` is on ``sys.path`` (its conftest.py puts it there), so a test imports
``from support.toy import ToyFamily``; a `bench` process finds the plugins here by module
name (``BENCH_PLUGINS=support.scripted``) with ``tests/`` on its ``PYTHONPATH``."""

from pathlib import Path

#: the repository's root
REPO = Path(__file__).resolve().parents[2]
