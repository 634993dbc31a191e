"""Triton entry point of the ``tabular`` model; the logic is python_backends/tabular/classifier.py."""

from python_backends.tabular.classifier import build_handler
from python_backends.triton_adapter import batched_model

TritonPythonModel = batched_model(build_handler)
