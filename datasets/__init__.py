"""Dataset families; importing this package registers them."""

from . import cmnist  # noqa: F401
