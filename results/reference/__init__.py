"""Published reference numbers (one YAML per paper), installed as ``debias_bench.reference``."""
