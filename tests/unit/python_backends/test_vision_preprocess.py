"""Unit tests for python_backends.vision.preprocess (numpy + Pillow only)."""

from __future__ import annotations

import io
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from PIL import Image

from python_backends.vision.preprocess import (
    IMAGE_SIZE,
    InvalidImageError,
    decode_image,
    to_pixels,
    top_k,
)


def _encode(image: Image.Image, fmt: str) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt)
    return buf.getvalue()


def _gradient(width: int = 320, height: int = 240) -> Image.Image:
    xs = np.linspace(0, 255, width, dtype=np.uint8)
    ys = np.linspace(0, 255, height, dtype=np.uint8)
    rgb = np.stack(np.broadcast_arrays(xs[None, :], ys[:, None], 128 + 0 * xs[None, :]), -1)
    return Image.fromarray(rgb.astype(np.uint8), "RGB")


def _png_chunk(kind: bytes, body: bytes) -> bytes:
    crc = struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF)
    return struct.pack(">I", len(body)) + kind + body + crc


def _png_claiming_size(width: int, height: int) -> bytes:
    """A small PNG whose header claims ``width`` x ``height`` RGB pixels."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _png_chunk(b"IHDR", ihdr)
        + _png_chunk(b"IDAT", zlib.compress(b"\x00" * 64))
        + _png_chunk(b"IEND", b"")
    )


@pytest.mark.parametrize("fmt", ["JPEG", "PNG", "WEBP", "BMP", "GIF"])
def test_decode_accepts_supported_formats(fmt: str) -> None:
    image = decode_image(_encode(_gradient(), fmt))
    assert image.size == (320, 240)


@pytest.mark.parametrize(
    "payload",
    [b"", b"hello, this is plain text and not an image\n", b"\x00" * 64],
    ids=["empty", "text", "zeros"],
)
def test_decode_rejects_non_images(payload: bytes) -> None:
    with pytest.raises(InvalidImageError):
        decode_image(payload)


def test_decode_rejects_truncated_jpeg() -> None:
    data = _encode(_gradient(), "JPEG")
    with pytest.raises(InvalidImageError, match=r"truncated|corrupt"):
        decode_image(data[: len(data) // 2])


def test_decode_rejects_truncated_png() -> None:
    data = _encode(_gradient(), "PNG")
    with pytest.raises(InvalidImageError):
        decode_image(data[: len(data) // 2])


def test_decode_rejects_unsupported_format() -> None:
    with pytest.raises(InvalidImageError, match="not a JPEG"):
        decode_image(_encode(_gradient(), "TIFF"))


@pytest.mark.parametrize("size", [(8000, 6000), (20000, 20000)])
def test_decode_rejects_huge_images(size: tuple[int, int]) -> None:
    with pytest.raises(InvalidImageError, match=r"large|limit"):
        decode_image(_png_claiming_size(*size))


def test_invalid_image_error_is_value_error() -> None:
    assert issubclass(InvalidImageError, ValueError)


def test_to_pixels_shape_dtype_and_range() -> None:
    images = [
        _gradient(320, 240),
        _gradient(100, 500).convert("L"),
        _gradient(300, 300).convert("RGBA"),
        _gradient(64, 48).convert("P"),
    ]
    pixels = to_pixels(images)
    assert pixels.shape == (4, 3, IMAGE_SIZE, IMAGE_SIZE)
    assert pixels.dtype == np.float32
    assert pixels.flags.c_contiguous
    assert pixels.min() >= -1.0 and pixels.max() <= 1.0


def test_to_pixels_normalization_values() -> None:
    white = Image.new("RGB", (300, 260), (255, 255, 255))
    black = Image.new("RGB", (300, 260), (0, 0, 0))
    pixels = to_pixels([white, black])
    np.testing.assert_allclose(pixels[0], 128.0 / 128.0)
    np.testing.assert_allclose(pixels[1], -127.0 / 128.0)


def test_to_pixels_channel_order_is_rgb() -> None:
    red = Image.new("RGB", (256, 256), (255, 0, 0))
    pixels = to_pixels([red])[0]
    assert pixels[0].mean() > 0.9 and pixels[1].mean() < -0.9 and pixels[2].mean() < -0.9


def test_to_pixels_rejects_empty_batch() -> None:
    with pytest.raises(ValueError):
        to_pixels([])


def test_top_k_sorted_descending_per_row() -> None:
    logits = np.array([[0.0, 3.0, 1.0, 2.0], [5.0, -1.0, 4.0, 0.0]], dtype=np.float32)
    probs, indices = top_k(logits, 3)
    assert indices.tolist() == [[1, 3, 2], [0, 2, 3]]
    assert probs.shape == (2, 3) and probs.dtype == np.float32
    assert np.all(np.diff(probs, axis=1) <= 0)
    full, _ = top_k(logits, 4)
    np.testing.assert_allclose(full.sum(axis=1), 1.0, rtol=1e-6)


def test_top_k_softmax_is_stable_for_large_logits() -> None:
    probs, indices = top_k(np.array([[1000.0, 999.0, -1000.0]]), 2)
    assert indices.tolist() == [[0, 1]]
    np.testing.assert_allclose(probs[0], [1 / (1 + np.e**-1), 1 / (1 + np.e)], rtol=1e-6)


@pytest.mark.parametrize("k", [0, 5])
def test_top_k_rejects_bad_k(k: int) -> None:
    with pytest.raises(ValueError):
        top_k(np.zeros((1, 4)), k)


def test_top_k_rejects_non_2d() -> None:
    with pytest.raises(ValueError):
        top_k(np.zeros(4), 1)


def test_preprocess_does_not_import_torch() -> None:
    code = (
        "import sys, python_backends.vision.preprocess as p; "
        "assert 'torch' not in sys.modules, 'preprocess imported torch'"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
