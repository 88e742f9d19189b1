"""The data stage: the dataset contract, families, the prepared-split store, integrity, options,
facts, downloads."""

from debias_bench import moved_attribute

#: ``debias_bench.data`` was a module before 2026-11-26: its names still resolve, with a warning
__getattr__ = moved_attribute(__name__, "debias_bench.data.contract")
