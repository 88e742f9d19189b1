"""The image operations the CIFAR-10-C corruptions (:mod:`debias_bench.datasets.corruptions`)
are built from: the defocus disk kernel, the one-sided line blur of motion blur and snow, the
centre zoom, the diamond-square fog map, the procedural frost textures, grey levels and
histogram equalisation. Each is deterministic given its arguments (its ``rng``)."""

from __future__ import annotations

from functools import lru_cache

import numpy as np
from PIL import Image, ImageDraw
from scipy import ndimage


def disk(radius: float, alias_blur: float) -> np.ndarray:
    """The anti-aliased disk kernel of CIFAR-10-C's defocus blur (17 x 17 for radius <= 8)."""
    half = 8 if radius <= 8 else int(radius)
    grid = np.arange(-half, half + 1)
    xx, yy = np.meshgrid(grid, grid)
    kernel = ((xx**2 + yy**2) <= radius**2).astype(np.float64)
    kernel /= kernel.sum()
    taps = 3 if radius <= 8 else 5  # OpenCV GaussianBlur ksize
    t = np.arange(taps) - taps // 2
    g = np.exp(-(t**2) / (2 * alias_blur**2))
    g /= g.sum()
    return ndimage.correlate(kernel, np.outer(g, g), mode="mirror")


def line_blur(x: np.ndarray, radius: float, sigma: float, angle_deg: float) -> np.ndarray:
    """One-sided Gaussian-weighted blur along a line (ImageMagick ``MotionBlurImage``)."""
    width = int(2 * np.ceil(radius) + 1)
    steps = np.arange(width, dtype=np.float64)
    weights = np.exp(-(steps**2) / (2 * sigma**2))
    weights /= weights.sum()
    theta = np.deg2rad(angle_deg)
    rows, cols = np.indices(x.shape[:2], dtype=np.float64)
    out = np.zeros_like(x, dtype=np.float64)
    planes = x if x.ndim == 3 else x[..., None]
    for step, weight in zip(steps, weights, strict=True):
        coords = [rows - step * np.sin(theta), cols - step * np.cos(theta)]
        shifted = np.stack(
            [
                ndimage.map_coordinates(planes[..., d], coords, order=1, mode="nearest")
                for d in range(planes.shape[-1])
            ],
            -1,
        )
        out += weight * (shifted if x.ndim == 3 else shifted[..., 0])
    return out


def clipped_zoom(img: np.ndarray, factor: float) -> np.ndarray:
    """Zoom into the centre by ``factor`` and crop back to the original size."""
    h = img.shape[0]
    ch = int(np.ceil(h / factor))
    top = (h - ch) // 2
    zoomed = ndimage.zoom(img[top : top + ch, top : top + ch], (factor, factor, 1), order=1)
    trim = (zoomed.shape[0] - h) // 2
    return zoomed[trim : trim + h, trim : trim + h]


def plasma_fractal(rng: np.random.Generator, mapsize: int = 32, decay: float = 3.0) -> np.ndarray:
    """Diamond-square height map in [0, 1] (the fog of CIFAR-10-C)."""
    grid = np.zeros((mapsize, mapsize), dtype=np.float64)
    step, wibble = mapsize, 100.0

    def wibbled(a: np.ndarray) -> np.ndarray:
        return a / 4 + wibble * rng.uniform(-wibble, wibble, a.shape)

    while step >= 2:
        half = step // 2
        corners = grid[0:mapsize:step, 0:mapsize:step]
        acc = corners + np.roll(corners, -1, axis=0)
        acc = acc + np.roll(acc, -1, axis=1)
        grid[half:mapsize:step, half:mapsize:step] = wibbled(acc)
        centres = grid[half:mapsize:step, half:mapsize:step]
        corners = grid[0:mapsize:step, 0:mapsize:step]
        lt = centres + np.roll(centres, 1, axis=0) + corners + np.roll(corners, -1, axis=1)
        grid[0:mapsize:step, half:mapsize:step] = wibbled(lt)
        tt = centres + np.roll(centres, 1, axis=1) + corners + np.roll(corners, -1, axis=0)
        grid[half:mapsize:step, 0:mapsize:step] = wibbled(tt)
        step //= 2
        wibble /= decay
    grid -= grid.min()
    return grid / grid.max()


@lru_cache(maxsize=1)
def frost_textures(count: int = 6, size: int = 160) -> tuple[np.ndarray, ...]:
    """Procedural stand-ins for CIFAR-10-C's frost photographs (see the docstring of
    :mod:`debias_bench.datasets.corruptions`):
    multi-scale noise (the frosted haze) plus branching bright strokes (ice crystals), tinted
    blue-white, uint8 ``size x size x 3``. Fixed seed: the same textures everywhere."""
    rng = np.random.default_rng(20190501)
    out = []
    for _ in range(count):
        haze = sum(
            ndimage.gaussian_filter(rng.random((size, size)), s, mode="wrap") * w
            for s, w in ((1, 0.2), (4, 0.5), (12, 0.8))
        )
        haze = (haze - haze.min()) / (haze.max() - haze.min())
        canvas = Image.new("L", (size, size), 0)
        draw = ImageDraw.Draw(canvas)
        for _ in range(int(rng.integers(25, 40))):  # crystals: a stem with side branches
            x0, y0 = rng.uniform(0, size, 2)
            angle, length = rng.uniform(0, 2 * np.pi), rng.uniform(10, 45)
            for k in range(int(rng.integers(3, 7))):
                x1, y1 = x0 + length * np.cos(angle), y0 + length * np.sin(angle)
                draw.line((x0, y0, x1, y1), fill=int(rng.integers(150, 255)), width=1)
                for sign in (-1, 1):
                    b = angle + sign * rng.uniform(0.5, 1.1)
                    bl = length * rng.uniform(0.2, 0.5)
                    draw.line((x1, y1, x1 + bl * np.cos(b), y1 + bl * np.sin(b)), fill=180)
                x0, y0 = x1, y1
                angle += rng.uniform(-0.5, 0.5)
                length *= 0.75 if k % 2 else 0.9
        crystals = ndimage.gaussian_filter(np.asarray(canvas, np.float64) / 255.0, 0.6)
        value = np.clip(0.35 + 0.45 * haze**1.5 + 0.9 * crystals, 0, 1)
        tint = np.array([0.80, 0.88, 1.0])
        out.append((value[..., None] * tint * 255).astype(np.uint8))
    return tuple(out)


def grey(x: np.ndarray) -> np.ndarray:
    return x @ np.array([0.299, 0.587, 0.114])


def equalize(img: np.ndarray) -> np.ndarray:
    hist = np.bincount(img.ravel(), minlength=256)
    cdf = hist.cumsum()
    nonzero = cdf[cdf > 0]
    if len(nonzero) == 0 or cdf[-1] == nonzero[0]:
        return img
    lut = np.round((cdf - nonzero[0]) / (cdf[-1] - nonzero[0]) * 255).clip(0, 255)
    return lut.astype(np.uint8)[img]
