"""The KServe v2 HTTP/REST inference protocol, including Triton's binary tensor extension.

Hand-written because no maintained library parses the server side of this protocol (tritonclient
implements only the client side, whose helpers ``serialize_byte_tensor`` /
``deserialize_bytes_tensor`` are reused here). ``decode_request(body, header_length)`` turns an
HTTP body into named numpy tensors and the requested outputs; ``encode_response`` does the
reverse, putting an output in the binary section when the client asked for binary data. Every
malformed input raises ``InvalidRequestError`` naming the offending tensor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson
from tritonclient.utils import deserialize_bytes_tensor, serialize_byte_tensor, triton_to_np_dtype

from gateway.errors import InvalidRequestError
from gateway.transport.protocol import Tensor

DATATYPES = {"BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64",
             "FP16", "FP32", "FP64", "BYTES"}


@dataclass(frozen=True)
class DecodedRequest:
    id: str | None
    inputs: list[Tensor]
    outputs: list[str]
    binary_outputs: frozenset[str]
    binary_default: bool


def _parse_header(body: bytes, header_length: int | None) -> tuple[dict[str, Any], bytes]:
    if header_length is not None and not 0 <= header_length <= len(body):
        raise InvalidRequestError("Inference-Header-Content-Length is outside the body")
    json_part = body if header_length is None else body[:header_length]
    try:
        header = orjson.loads(json_part)
    except orjson.JSONDecodeError as exc:
        raise InvalidRequestError(f"request body is not valid JSON: {exc}", code="invalid_json") from exc
    if not isinstance(header, dict) or not isinstance(header.get("inputs"), list) or not header["inputs"]:
        raise InvalidRequestError("the body needs a non-empty 'inputs' list", param="inputs")
    return header, b"" if header_length is None else body[header_length:]


def _shape(spec: dict[str, Any], name: str) -> tuple[int, ...]:
    shape = spec.get("shape")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise InvalidRequestError(f"input '{name}': shape must be a list of non-negative integers",
                                  param=f"inputs.{name}.shape")
    return tuple(shape)


def _from_json(data: Any, datatype: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    flat = np.array(data, dtype=np.object_).reshape(-1) if datatype == "BYTES" else None
    try:
        if flat is not None:
            array = np.array([v.encode("utf-8") if isinstance(v, str) else bytes(v) for v in flat],
                             dtype=np.object_)
        else:
            array = np.array(data, dtype=triton_to_np_dtype(datatype)).reshape(-1)
        return array.reshape(shape)
    except (TypeError, ValueError) as exc:
        raise InvalidRequestError(f"input '{name}': data does not match {datatype} {list(shape)}",
                                  param=f"inputs.{name}.data") from exc


def _from_binary(raw: bytes, datatype: str, shape: tuple[int, ...], name: str) -> np.ndarray:
    try:
        if datatype == "BYTES":
            array = deserialize_bytes_tensor(raw)
        else:
            array = np.frombuffer(raw, dtype=triton_to_np_dtype(datatype))
        return array.reshape(shape)
    except (TypeError, ValueError, IndexError) as exc:
        raise InvalidRequestError(f"input '{name}': binary data does not match {datatype} {list(shape)}",
                                  param=f"inputs.{name}") from exc


def _decode_input(spec: Any, binary: bytes, offset: int) -> tuple[Tensor, int]:
    if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
        raise InvalidRequestError("every input needs a 'name'", param="inputs")
    name = spec["name"]
    datatype = spec.get("datatype")
    if datatype not in DATATYPES:
        raise InvalidRequestError(f"input '{name}': unknown datatype {datatype!r}", param=f"inputs.{name}.datatype")
    shape = _shape(spec, name)
    size = (spec.get("parameters") or {}).get("binary_data_size")
    if size is not None:
        if not isinstance(size, int) or size < 0 or offset + size > len(binary):
            raise InvalidRequestError(f"input '{name}': binary_data_size runs past the body", param=f"inputs.{name}")
        return Tensor(name, datatype, _from_binary(binary[offset:offset + size], datatype, shape, name)), offset + size
    if "data" not in spec:
        raise InvalidRequestError(f"input '{name}' has neither 'data' nor binary data", param=f"inputs.{name}")
    return Tensor(name, datatype, _from_json(spec["data"], datatype, shape, name)), offset


def decode_request(body: bytes, header_length: int | None) -> DecodedRequest:
    header, binary = _parse_header(body, header_length)
    inputs, offset = [], 0
    for spec in header["inputs"]:
        tensor, offset = _decode_input(spec, binary, offset)
        inputs.append(tensor)
    outputs, binary_outputs = [], set()
    for spec in header.get("outputs") or []:
        if not isinstance(spec, dict) or not isinstance(spec.get("name"), str):
            raise InvalidRequestError("every requested output needs a 'name'", param="outputs")
        outputs.append(spec["name"])
        if (spec.get("parameters") or {}).get("binary_data"):
            binary_outputs.add(spec["name"])
    request_id = header.get("id")
    binary_default = bool((header.get("parameters") or {}).get("binary_data_output", False))
    return DecodedRequest(str(request_id) if request_id is not None else None, inputs, outputs,
                          frozenset(binary_outputs), binary_default)


def _json_data(array: np.ndarray, datatype: str) -> list[Any]:
    if datatype == "BYTES":
        return [v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v)
                for v in array.reshape(-1)]
    return array.reshape(-1).tolist()  # type: ignore[no-any-return]


def encode_response(model: str, version: str, request_id: str | None, outputs: list[Tensor],
                    binary: set[str]) -> tuple[bytes, int | None]:
    """The response body and, when any output is binary, the JSON header's length."""
    entries, chunks = [], []
    for tensor in outputs:
        entry: dict[str, Any] = {"name": tensor.name, "datatype": tensor.datatype,
                                 "shape": list(tensor.array.shape)}
        if tensor.name in binary:
            raw = (serialize_byte_tensor(tensor.array).item() if tensor.datatype == "BYTES"
                   else np.ascontiguousarray(tensor.array).tobytes())
            entry["parameters"] = {"binary_data_size": len(raw)}
            chunks.append(raw)
        else:
            entry["data"] = _json_data(tensor.array, tensor.datatype)
        entries.append(entry)
    header: dict[str, Any] = {"model_name": model, "model_version": version, "outputs": entries}
    if request_id is not None:
        header["id"] = request_id
    json_bytes = orjson.dumps(header)
    if not chunks:
        return json_bytes, None
    return json_bytes + b"".join(chunks), len(json_bytes)
