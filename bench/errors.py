"""Errors that reach the user: each names the problem and, where there is one, the fix."""

from __future__ import annotations


class BenchError(Exception):
    """An error caused by input or environment, reported to the user without a traceback."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message}\n  hint: {self.hint}"


class UnknownNameError(BenchError, KeyError):
    """A method, dataset, preset or protocol name that is not registered."""


class DataNotFoundError(BenchError, FileNotFoundError):
    """Raw or prepared data that is not where we looked."""


class CorruptDataError(BenchError, ValueError):
    """A data file that exists but cannot be read or fails its checks."""


class ConfigError(BenchError, ValueError):
    """An invalid hyperparameter, override or combination."""
