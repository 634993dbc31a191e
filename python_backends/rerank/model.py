"""Triton entry point of the ``rerank`` model; the logic is python_backends/rerank/scorer.py."""

from python_backends.rerank.scorer import build_handler
from python_backends.triton_adapter import batched_model

TritonPythonModel = batched_model(build_handler)
