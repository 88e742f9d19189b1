"""Configuration: hyperparameter declarations, their resolution into a run's config, search spaces,
run length, the grid."""

from debias_bench import moved_attribute

#: ``debias_bench.config`` was a module before 2026-11-26: its names still resolve, with a warning
__getattr__ = moved_attribute(__name__, "debias_bench.config.run_config")
