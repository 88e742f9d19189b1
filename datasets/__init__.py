"""Dataset families. Importing this package imports every module in it, and each family
registers itself with ``@register_dataset``: adding a dataset is adding a file."""

from debias_bench.registry import DATASETS, import_modules

#: the listing order of ``bench list datasets`` and ``--datasets all``: the synthetic sets, then
#: the real ones; the others follow as registered
LISTED_FIRST = ("cmnist", "cifar10c", "bffhq", "dogs_and_cats", "bar")

DATASETS.list_first(LISTED_FIRST)
import_modules(__name__, __path__)
