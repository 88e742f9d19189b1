"""Everything that measures speed: steps/s and memory, launcher and tracker overhead, the grid's
cost."""

from debias_bench import moved_attribute

#: ``debias_bench.perf`` was a module before 2026-11-26: its names still resolve, with a warning
__getattr__ = moved_attribute(__name__, "debias_bench.perf.speed")
