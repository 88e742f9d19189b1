"""Debiasing methods. Each built-in method is a trainer module here (``lff.py``, with its recipe
in ``lff.yaml`` beside it) and a declaration in ``declared/`` (its params class and listing
metadata, torch-free). Importing this package declares every method and imports no trainer:
a trainer is imported when a run first needs it. A plugin method is one file
(``@register_method`` on its trainer class: docs, Adding a method)."""

from importlib import import_module

from debias_bench.registry import METHODS

#: the listing order of ``bench list methods`` and ``--methods all``: the paper's methods as its
#: tables order them, then the methods beyond the paper; the others follow as registered
LISTED_FIRST = (
    "vanilla",
    "lff",
    "lff_be",
    "end",
    "sd",
    "disent",
    "selecmix",
    "etf_debias",
    "groupdro",
    "jtt",
    "pgd",
)

METHODS.list_first(LISTED_FIRST)
import_module(f"{__name__}.declared")
