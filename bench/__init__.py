"""debias-bench: a benchmark harness for debiasing methods (engine package)."""

__version__ = "0.1.0"
