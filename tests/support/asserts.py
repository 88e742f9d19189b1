"""Assertions shared by the tests."""

from __future__ import annotations

import numpy as np


def assert_close_nested(a, b) -> None:
    if isinstance(a, dict):
        assert a.keys() == b.keys()
        for k in a:
            assert_close_nested(a[k], b[k])
    elif isinstance(a, list):
        assert len(a) == len(b)
        for x, y in zip(a, b, strict=True):
            assert_close_nested(x, y)
    elif isinstance(a, float):
        assert np.isclose(a, b, rtol=0, atol=1e-9), (a, b)
    else:
        assert a == b
