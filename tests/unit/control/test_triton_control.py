"""control.triton_control: what an operator reads of a failed load."""

from __future__ import annotations

from control.triton_control import without_traceback

TRITON_LOAD_ERROR = (
    "load failed for model 'embed': version 6 is at UNAVAILABLE state: Internal: InvalidProtobuf: "
    "[ONNXRuntimeError] : 7 : INVALID_PROTOBUF : Load model from /r/embed/6/model.onnx failed:Protobuf "
    "parsing failed.\n\nAt:\n  /venv/onnxruntime/capi/onnxruntime_inference_collection.py(753): "
    "_create_inference_session\n  /app/python_backends/batching.py(88): onnx_session\n;\n")


def test_a_python_backend_traceback_is_cut_from_the_cause() -> None:
    cause = without_traceback(TRITON_LOAD_ERROR)
    assert cause.endswith("Protobuf parsing failed.") and "version 6" in cause
    assert "At:" not in cause and "batching.py" not in cause and "\n" not in cause


def test_a_message_without_a_traceback_is_kept_whole() -> None:
    assert without_traceback("failed to load 'x': no version is available\n") == \
        "failed to load 'x': no version is available"
