"""The ``tabular`` model: digit classification from 64 pixel features on ONNX Runtime.

Input ``features`` float32 [rows, 64] (intensities 0..16, finite); outputs ``probabilities``
float32 [rows, 10] and ``class_id`` int64 [rows, 1].
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from python_backends.batching import InvalidInputError, Tensors, onnx_session

FEATURES = 64


class TabularHandler:
    def __init__(self, model_dir: Path, intra_op_threads: int = 1) -> None:
        self.session = onnx_session(str(model_dir / "model.onnx"), intra_op_threads)

    def prepare(self, inputs: Tensors) -> np.ndarray:
        if "features" not in inputs:
            raise InvalidInputError("features", "missing")
        features = np.asarray(inputs["features"], dtype=np.float32).reshape(-1, FEATURES)
        if not np.isfinite(features).all():
            raise InvalidInputError("features", "must be finite numbers")
        return features

    def infer(self, prepared: Sequence[np.ndarray]) -> list[Tensors]:
        probabilities = self.session.run(["probabilities"], {"features": np.concatenate(prepared)})[0]
        class_ids = probabilities.argmax(axis=1).astype(np.int64).reshape(-1, 1)
        outputs: list[Tensors] = []
        start = 0
        for rows in prepared:
            end = start + len(rows)
            outputs.append({"probabilities": probabilities[start:end], "class_id": class_ids[start:end]})
            start = end
        return outputs


def build_handler(model_dir: Path, params: dict[str, str]) -> TabularHandler:
    return TabularHandler(model_dir, int(params.get("intra_op_threads", "1")))
