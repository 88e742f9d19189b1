"""Dataset families. Importing this package imports every module in it, and each family
registers itself with ``@register_dataset``: adding a dataset is adding a file."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
