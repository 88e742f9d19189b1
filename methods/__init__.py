"""Debiasing methods. Importing this package imports every module in it, and each module
registers its method with ``@register_method``: adding a method is adding a file."""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")
