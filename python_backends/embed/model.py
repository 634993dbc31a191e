"""Triton entry point of the ``embed`` model; the logic is python_backends/embed/encoder.py."""

from python_backends.embed.encoder import build_handler
from python_backends.triton_adapter import batched_model

TritonPythonModel = batched_model(build_handler)
