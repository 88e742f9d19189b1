"""Every built-in method's declaration: its params class and listing metadata, one module each,
importable without torch; importing this package declares them all (its trainer is imported
when a run first needs it: ``debias_bench.config.method_params``)."""

from debias_bench.registry import import_modules

import_modules(__name__, __path__)
