"""The server side of KServe v2 against the client side that tritonclient.http implements."""

import numpy as np
import pytest
import tritonclient.http as httpclient

from gateway.errors import InvalidRequestError
from gateway.kserve_codec import decode_request, encode_response
from gateway.transport.protocol import Tensor


def _client_body(binary: bool) -> tuple[bytes, int | None, np.ndarray, np.ndarray]:
    features = np.arange(128, dtype=np.float32).reshape(2, 64)
    # JSON can carry only UTF-8 text; raw bytes need the binary extension.
    images = np.array([[b"\x89PNG fake"], [b"\xff\xd8 jpeg"]] if binary else [[b"text"], [b"more"]], dtype=object)
    inputs = [httpclient.InferInput("features", [2, 64], "FP32"), httpclient.InferInput("image", [2, 1], "BYTES")]
    inputs[0].set_data_from_numpy(features, binary_data=binary)
    inputs[1].set_data_from_numpy(images, binary_data=binary)
    outputs = [httpclient.InferRequestedOutput("probabilities", binary_data=binary)]
    body, json_size = httpclient.InferenceServerClient.generate_request_body(inputs, outputs=outputs, request_id="r1")
    return body if isinstance(body, bytes) else body.encode(), json_size, features, images


@pytest.mark.parametrize("binary", [True, False])
def test_requests_built_by_tritonclient_decode_to_the_same_tensors(binary: bool) -> None:
    body, json_size, features, images = _client_body(binary)
    decoded = decode_request(body, json_size)
    assert decoded.id == "r1"
    assert [t.name for t in decoded.inputs] == ["features", "image"]
    assert np.array_equal(decoded.inputs[0].array, features)
    assert decoded.inputs[1].array.tolist() == images.tolist()
    assert decoded.outputs == ["probabilities"]
    assert decoded.binary_outputs == (frozenset({"probabilities"}) if binary else frozenset())


@pytest.mark.parametrize("binary", [True, False])
def test_responses_parse_with_tritonclient(binary: bool) -> None:
    probabilities = np.random.default_rng(0).random((2, 10), dtype=np.float32)
    labels = np.array([[b"tabby", b"cup"]], dtype=object)
    tensors = [Tensor("probabilities", "FP32", probabilities), Tensor("labels", "BYTES", labels)]
    body, json_size = encode_response("m", "1", "r1", tensors, {"probabilities", "labels"} if binary else set())
    result = httpclient.InferenceServerClient.parse_response_body(body, header_length=json_size)
    assert np.array_equal(result.as_numpy("probabilities"), probabilities)
    as_text = [[v.decode() if isinstance(v, bytes) else v for v in row] for row in result.as_numpy("labels").tolist()]
    assert as_text == [["tabby", "cup"]]


@pytest.mark.parametrize(("body", "match"), [
    (b"{not json", "not valid JSON"),
    (b'{"inputs": []}', "non-empty 'inputs'"),
    (b'{"inputs": [{"name": "x", "datatype": "FP99", "shape": [1], "data": [1]}]}', "unknown datatype"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "data": [1]}]}', "does not match"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1], "data": [1]}]}', "shape"),
    (b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}', "neither"),
    (b'{"inputs": [{"name": "x", "datatype": "INT32", "shape": [1], "data": ["a"]}]}', "does not match"),
])
def test_malformed_requests_raise_invalid_request(body: bytes, match: str) -> None:
    with pytest.raises(InvalidRequestError, match=match):
        decode_request(body, None)


def test_binary_sizes_past_the_body_are_rejected() -> None:
    header = b'{"inputs": [{"name": "x", "datatype": "FP32", "shape": [4], "parameters": {"binary_data_size": 16}}]}'
    with pytest.raises(InvalidRequestError, match="past the body"):
        decode_request(header + b"\x00" * 8, len(header))
    with pytest.raises(InvalidRequestError, match="outside the body"):
        decode_request(header, len(header) + 5)
