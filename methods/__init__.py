"""Debiasing methods; importing this package registers them."""

from . import etf_debias, vanilla  # noqa: F401
