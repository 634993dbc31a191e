"""Thin Triton python-backend adapter for batched models (runs only inside the Triton stub).

``batched_model(build)`` returns a ``TritonPythonModel`` class whose ``initialize`` builds the
handler from the model's version directory and string parameters (failing the load, not the
first request, when anything is missing), and whose ``execute`` converts Triton tensors to numpy,
calls ``run_batch`` and converts back. An ``InvalidInputError`` becomes an INVALID_ARG error on
that request alone.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import triton_python_backend_utils as pb_utils

from python_backends.batching import BatchHandler, InvalidInputError, run_batch


def model_parameters(model_config: dict[str, Any]) -> dict[str, str]:
    """The ``parameters`` of a model config as plain strings."""
    params = model_config.get("parameters", {})
    return {key: value["string_value"] for key, value in params.items()}


def version_dir(args: dict[str, str]) -> Path:
    return Path(args["model_repository"]) / args["model_version"]


def invalid_arg_response(message: str) -> Any:
    """A response failing its request with INVALID_ARG (the gateway maps it to a 400)."""
    code = getattr(pb_utils.TritonError, "INVALID_ARG", None)
    error = pb_utils.TritonError(message, code) if code is not None else pb_utils.TritonError(message)
    return pb_utils.InferenceResponse(error=error)


def batched_model(build: Callable[[Path, dict[str, str]], BatchHandler]) -> type:
    """A TritonPythonModel class driving the handler that ``build`` makes."""

    class TritonPythonModel:
        def initialize(self, args: dict[str, str]) -> None:
            config = json.loads(args["model_config"])
            self.input_names = [spec["name"] for spec in config["input"]]
            self.handler = build(version_dir(args), model_parameters(config))

        def execute(self, requests: list[Any]) -> list[Any]:
            batch = []
            for request in requests:
                tensors = {}
                for name in self.input_names:
                    tensor = pb_utils.get_input_tensor_by_name(request, name)
                    if tensor is not None:
                        tensors[name] = tensor.as_numpy()
                batch.append(tensors)
            responses = []
            for result in run_batch(self.handler, batch):
                if isinstance(result, InvalidInputError):
                    responses.append(invalid_arg_response(str(result)))
                else:
                    outputs = [pb_utils.Tensor(name, value) for name, value in result.items()]
                    responses.append(pb_utils.InferenceResponse(output_tensors=outputs))
            return responses

        def finalize(self) -> None:
            self.handler = None

    return TritonPythonModel
