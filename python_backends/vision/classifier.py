"""The ``vision`` model: ImageNet top-k from encoded image bytes (EfficientNet-Lite0, ONNX Runtime).

Input ``image``: one encoded JPEG/PNG/WebP/BMP/GIF per row; bytes that are not an image fail that
request with INVALID_ARG. Outputs per row: ``scores`` float32 [k] (softmax probabilities,
descending), ``class_ids`` int64 [k] and ``labels`` bytes [k] (ImageNet class names).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from python_backends.batching import InvalidInputError, Tensors, onnx_session
from python_backends.vision.preprocess import InvalidImageError, decode_image, to_pixels, top_k


class VisionHandler:
    def __init__(self, model_dir: Path, k: int = 5, intra_op_threads: int = 1) -> None:
        self.session = onnx_session(str(model_dir / "model.onnx"), intra_op_threads)
        labels = (model_dir / "labels.txt").read_text(encoding="utf-8").splitlines()
        self.labels = np.array([label.encode() for label in labels], dtype=np.object_)
        self.k = k

    def prepare(self, inputs: Tensors) -> np.ndarray:
        if "image" not in inputs:
            raise InvalidInputError("image", "missing")
        images = []
        for value in inputs["image"].reshape(-1):
            try:
                images.append(decode_image(bytes(value)))
            except InvalidImageError as exc:
                raise InvalidInputError("image", str(exc)) from exc
        return to_pixels(images)

    def infer(self, prepared: Sequence[np.ndarray]) -> list[Tensors]:
        logits = self.session.run(["logits"], {"pixels": np.concatenate(prepared)})[0]
        scores, class_ids = top_k(logits, self.k)
        outputs: list[Tensors] = []
        start = 0
        for pixels in prepared:
            end = start + len(pixels)
            ids = class_ids[start:end].astype(np.int64)
            outputs.append({
                "scores": scores[start:end].astype(np.float32),
                "class_ids": ids,
                "labels": self.labels[ids],
            })
            start = end
        return outputs


def build_handler(model_dir: Path, params: dict[str, str]) -> VisionHandler:
    return VisionHandler(
        model_dir, k=int(params.get("top_k", "5")),
        intra_op_threads=int(params.get("intra_op_threads", "1")),
    )
