"""Image decoding, pixel preparation and top-k for the EfficientNet-Lite0 backend.

Pure numpy + Pillow (no torch), so it can run inside a Triton Python backend
or the gateway.  The pixel layout matches ``control/assets/efficientnet_lite.py``:
float32 ``[N, 3, 224, 224]`` RGB, shorter side resized to 256 (bicubic),
center crop 224, normalized as ``(x - 127) / 128`` on 0..255 values (the
TensorFlow EfficientNet-Lite input normalization).
"""

from __future__ import annotations

import io

import numpy as np
import numpy.typing as npt
from PIL import Image, ImageOps

IMAGE_SIZE = 224
RESIZE_SHORTER = 256
PIXEL_MEAN = 127.0
PIXEL_STD = 128.0
MAX_PIXELS = 40_000_000
ACCEPTED_FORMATS = ("JPEG", "PNG", "WEBP", "BMP", "GIF")


class InvalidImageError(ValueError):
    """The payload is not a decodable, acceptably sized image."""


def decode_image(data: bytes) -> Image.Image:
    """Decode JPEG/PNG/WebP/BMP/GIF bytes into a fully loaded Pillow image.

    EXIF orientation is applied.  Raises InvalidImageError for empty or
    non-image payloads, other formats, truncated or corrupt files, and images
    larger than ``MAX_PIXELS``.
    """
    if not data:
        raise InvalidImageError("empty image payload")
    try:
        image = Image.open(io.BytesIO(data), formats=ACCEPTED_FORMATS)
    except Image.DecompressionBombError as exc:
        raise InvalidImageError(f"image too large: {exc}") from exc
    except Exception as exc:
        raise InvalidImageError("payload is not a JPEG, PNG, WebP, BMP or GIF image") from exc
    width, height = image.size
    if width <= 0 or height <= 0:
        raise InvalidImageError(f"image has invalid size {width}x{height}")
    if width * height > MAX_PIXELS:
        raise InvalidImageError(
            f"image is {width}x{height} ({width * height / 1e6:.1f} MP); "
            f"the limit is {MAX_PIXELS / 1e6:.0f} MP"
        )
    try:
        image.load()
        oriented = ImageOps.exif_transpose(image)
    except Exception as exc:
        raise InvalidImageError(f"corrupt or truncated {image.format} image: {exc}") from exc
    return oriented if oriented is not None else image


def _to_rgb(image: Image.Image) -> Image.Image:
    """Convert to RGB, compositing any transparency onto white."""
    has_alpha = image.mode in ("RGBA", "LA", "PA") or (image.mode == "P" and "transparency" in image.info)
    if not has_alpha:
        return image.convert("RGB")
    rgba = image.convert("RGBA")
    background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
    return Image.alpha_composite(background, rgba).convert("RGB")


def _resize_and_crop(image: Image.Image) -> Image.Image:
    """Resize the shorter side to RESIZE_SHORTER, then center crop IMAGE_SIZE."""
    width, height = image.size
    scale = RESIZE_SHORTER / min(width, height)
    new_w = max(RESIZE_SHORTER, round(width * scale))
    new_h = max(RESIZE_SHORTER, round(height * scale))
    resized = image.resize((new_w, new_h), Image.Resampling.BICUBIC, reducing_gap=3.0)
    left = (new_w - IMAGE_SIZE) // 2
    top = (new_h - IMAGE_SIZE) // 2
    return resized.crop((left, top, left + IMAGE_SIZE, top + IMAGE_SIZE))


def to_pixels(images: list[Image.Image]) -> npt.NDArray[np.float32]:
    """Turn decoded images into the model input: float32 ``[N, 3, 224, 224]``."""
    if not images:
        raise ValueError("to_pixels needs at least one image")
    batch = np.empty((len(images), 3, IMAGE_SIZE, IMAGE_SIZE), dtype=np.float32)
    for index, image in enumerate(images):
        crop = _resize_and_crop(_to_rgb(image))
        hwc = np.asarray(crop, dtype=np.float32)
        batch[index] = ((hwc - PIXEL_MEAN) / PIXEL_STD).transpose(2, 0, 1)
    return batch


def top_k(logits: npt.ArrayLike, k: int) -> tuple[npt.NDArray[np.float32], npt.NDArray[np.intp]]:
    """Softmax each row of ``[N, C]`` logits; return the k largest per row.

    Returns ``(probabilities, indices)``, both ``[N, k]``, sorted by
    descending probability (ties keep the lower class index first).
    """
    scores = np.asarray(logits, dtype=np.float64)
    if scores.ndim != 2:
        raise ValueError(f"logits must be 2-D [N, C], got shape {scores.shape}")
    if not 1 <= k <= scores.shape[1]:
        raise ValueError(f"k must be in 1..{scores.shape[1]}, got {k}")
    shifted = scores - scores.max(axis=1, keepdims=True)
    exp = np.exp(shifted)
    probs = exp / exp.sum(axis=1, keepdims=True)
    indices = np.argsort(-probs, axis=1, kind="stable")[:, :k]
    return np.take_along_axis(probs, indices, axis=1).astype(np.float32), indices
