from __future__ import annotations

import numpy as np
import pytest

from debias_bench.datasets.corruptions import (
    CORRUPTION_SETS,
    CORRUPTIONS,
    corrupt,
    disk,
    frost_textures,
)


def _image(seed: int = 0) -> np.ndarray:
    """A 32x32 picture with structure (gradient + a square), not flat noise."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:32, 0:32]
    img = np.stack([xx * 6, yy * 6, (xx + yy) * 3], -1).astype(float)
    img += rng.normal(0, 8, (32, 32, 3))
    img[10:22, 10:22] = (200, 40, 90)
    return np.clip(img, 0, 255).astype(np.uint8)


CHANGING = [n for n in CORRUPTIONS if n != "original"]


@pytest.mark.parametrize("name", CHANGING)
@pytest.mark.parametrize("severity", [1, 5])
def test_corruption_changes_image_keeps_shape_and_dtype(name, severity):
    x = _image()
    y = corrupt(name, x, severity, np.random.default_rng(0))
    assert y.shape == x.shape and y.dtype == np.uint8
    assert np.abs(y.astype(int) - x.astype(int)).mean() > 0.5, name
    assert x is not y


@pytest.mark.parametrize("name", list(CORRUPTIONS))
def test_corruption_is_deterministic_given_the_rng(name):
    x = _image(1)
    a = corrupt(name, x, 5, np.random.default_rng([3, 1]))
    b = corrupt(name, x, 5, np.random.default_rng([3, 1]))
    np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize(
    "name", ["gaussian_noise", "impulse_noise", "frost", "elastic_transform", "fog", "spatter"]
)
def test_random_corruptions_depend_on_the_seed(name):
    x = _image(2)
    a = corrupt(name, x, 5, np.random.default_rng(1))
    b = corrupt(name, x, 5, np.random.default_rng(2))
    assert not np.array_equal(a, b)


def test_higher_severity_is_stronger_for_monotone_corruptions():
    x = _image(3)
    for name in ("gaussian_noise", "gaussian_blur", "contrast", "brightness", "pixelate"):
        diffs = [
            np.abs(corrupt(name, x, s, np.random.default_rng(0)).astype(int) - x).mean()
            for s in (1, 5)
        ]
        assert diffs[1] > diffs[0], name


def test_original_is_identity_and_severity_is_checked():
    x = _image()
    np.testing.assert_array_equal(corrupt("original", x, 3, np.random.default_rng(0)), x)
    with pytest.raises(ValueError, match=r"1\.\.5"):
        corrupt("contrast", x, 6, np.random.default_rng(0))


def test_corruption_sets_have_ten_distinct_known_corruptions():
    for name, members in CORRUPTION_SETS.items():
        assert len(members) == 10 and len(set(members)) == 10, name
        assert set(members) <= set(CORRUPTIONS)
    default = CORRUPTION_SETS["default"]
    assert default[:4] == ("brightness", "contrast", "gaussian_noise", "frost")
    assert "gaussian_blur" in default and "pixelate" in default


def test_contrast_and_brightness_follow_their_formulas():
    x = _image(4)
    y = corrupt("contrast", x, 5, np.random.default_rng(0)).astype(float)
    xf = x / 255.0
    mean = xf.mean(axis=(0, 1))
    expected = np.clip((xf - mean) * 0.15 + mean, 0, 1) * 255
    assert np.abs(y - np.floor(expected)).max() <= 1
    grey = np.full((32, 32, 3), 100, np.uint8)
    bright = corrupt("brightness", grey, 5, np.random.default_rng(0))
    assert abs(int(bright[0, 0, 0]) - int((100 / 255 + 0.3) * 255)) <= 1  # V += 0.3


def test_defocus_kernel_is_normalised_and_frost_textures_are_fixed():
    k = disk(1.5, 0.1)
    assert k.shape == (17, 17) and np.isclose(k.sum(), 1.0)
    a, b = frost_textures(), frost_textures.__wrapped__()
    assert len(a) == 6 and all(np.array_equal(s, t) for s, t in zip(a, b, strict=True))
    assert all(t.dtype == np.uint8 and t.shape[2] == 3 and t.mean() > 80 for t in a)
