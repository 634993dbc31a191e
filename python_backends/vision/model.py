"""Triton entry point of the ``vision`` model; the logic is python_backends/vision/classifier.py."""

from python_backends.triton_adapter import batched_model
from python_backends.vision.classifier import build_handler

TritonPythonModel = batched_model(build_handler)
