"""Imported once by the warm worker server (:mod:`.forkserver`) before it forks any run: what
every run would otherwise import again, about 5 s on a loaded 2-core machine.

``torch._dynamo`` is here on purpose: ``torch.optim`` imports it lazily on the first
``Optimizer.add_param_group`` and on every ``step`` (to mark graph breaks), about 1-2 s in each
cold worker. scikit-learn is not: DFR imports it when it fits (about 1.1 s of each DFR run),
but here every sweep's first run would wait about 1 s longer for the server (its import 6.5 s
against 5.6 s, measured), DFR in the grid or not. Only imports happen here, no tensor work: the
server must not start thread pools or touch CUDA before it forks (each run sets its own
threads and ``CUDA_VISIBLE_DEVICES``).

The sweep's plugins (``BENCH_WARM_PLUGINS``: modules or ``.py`` paths) are imported too; one
that fails is left to the run, which imports it again and reports the error.
"""

from __future__ import annotations

import contextlib
import os

import torch._dynamo  # noqa: F401  (see the module docstring)
import torchvision  # noqa: F401

import debias_bench.datasets
import debias_bench.methods  # noqa: F401
from debias_bench.launchers import run_one as sweep  # noqa: F401
from debias_bench.launchers import worker  # noqa: F401
from debias_bench.launchers.forkserver import WARM_PLUGINS_ENV
from debias_bench.plugins.loading import import_plugin
from debias_bench.runs import provenance
from debias_bench.training import engine  # noqa: F401

provenance.provenance()  # the code version (git commit) of what this server imported, once

for _entry in filter(None, os.environ.get(WARM_PLUGINS_ENV, "").split(",")):
    with contextlib.suppress(Exception):  # the run imports it again and names the error
        import_plugin(_entry)
