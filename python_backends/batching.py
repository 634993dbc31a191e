"""The contract between Triton's batched python models and their plain logic modules.

A batch handler works in two steps, so that one bad request never fails its batch-mates:
``prepare`` validates and decodes one request's inputs (raising ``InvalidInputError``, which
fails only that request), then ``infer`` runs the model once over all prepared requests and
returns each request's outputs, in order. ``run_batch`` applies that contract; the Triton
adapter (``triton_adapter.py``) only converts tensors.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

Tensors = dict[str, np.ndarray]


class InvalidInputError(ValueError):
    """A request's input is malformed; reported to its client as a 400, names the input."""

    def __init__(self, input_name: str, message: str) -> None:
        super().__init__(f"input '{input_name}': {message}")
        self.input_name = input_name


class BatchHandler(Protocol):
    """Logic of one batched model; see the module docstring."""

    def prepare(self, inputs: Tensors) -> Any: ...

    def infer(self, prepared: Sequence[Any]) -> list[Tensors]: ...


def run_batch(handler: BatchHandler, requests: Sequence[Tensors]) -> list[Tensors | InvalidInputError]:
    """Outputs for each request, or the InvalidInputError that rejected it; same order."""
    results: list[Tensors | InvalidInputError] = []
    prepared: list[Any] = []
    positions: list[int] = []
    for index, inputs in enumerate(requests):
        try:
            prepared.append(handler.prepare(inputs))
        except InvalidInputError as exc:
            results.append(exc)
            continue
        results.append({})
        positions.append(index)
    if prepared:
        for index, outputs in zip(positions, handler.infer(prepared), strict=True):
            results[index] = outputs
    return results


def decode_texts(inputs: Tensors, name: str) -> list[str]:
    """The UTF-8 strings of BYTES input ``name`` (any shape, flattened)."""
    if name not in inputs:
        raise InvalidInputError(name, "missing")
    texts = []
    for value in inputs[name].reshape(-1):
        raw = value if isinstance(value, bytes) else str(value).encode()
        try:
            texts.append(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise InvalidInputError(name, f"not valid UTF-8 ({exc.reason})") from exc
    return texts


def rows_of(inputs: Tensors, name: str) -> int:
    """How many batch rows input ``name`` has."""
    return int(inputs[name].shape[0]) if inputs[name].ndim else 1


def onnx_session(path: str, intra_op_threads: int) -> Any:
    """An ONNX Runtime CPU session with a bounded thread count (workers share few cores).

    Intra-op threads do not spin between runs: a spinning worker thread starves the python
    backend stub's own threads on a small host (measured on 2 cores: 11-13 requests in 8 s stalled
    ~500 ms with spinning on, none with it off).
    """
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = intra_op_threads
    options.inter_op_num_threads = 1
    options.add_session_config_entry("session.intra_op.allow_spinning", "0")
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(path, sess_options=options, providers=["CPUExecutionProvider"])
