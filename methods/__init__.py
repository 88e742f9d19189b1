"""Debiasing methods. Importing this package imports every module in it, and each module
registers its method with ``@register_method``: adding a method is adding a file."""

from debias_bench.registry import METHODS, import_modules

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
import_modules(__name__, __path__)
