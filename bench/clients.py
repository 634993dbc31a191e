"""One request per batched model, through the gateway (HTTP) and directly to Triton (gRPC).

``GatewayClient.sender(model)`` and ``DirectClient.sender(model)`` return a ``Send`` for the
load runner: ``await send(i)`` sends request ``i`` (inputs vary with ``i``) and returns only when
the answer arrived and looked right; otherwise it raises ``BadResponse`` (or the transport's
error). Request bodies and tensors are built once up front, so the client's own work per request
is the same small amount on both paths: send, receive, parse, check.

Per request: embed = 1 sentence (``encoding_format: base64``, the openai SDK's default), rerank =
1 query x 8 documents (top 3), vision = 1 JPEG photo (KServe v2 binary tensor extension through
the gateway), tabular = 1 row of 64 features.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from typing import Any

import aiohttp
import httpx
import numpy as np
import orjson
import tritonclient.grpc.aio as grpcclient
import tritonclient.http as httpclient

from bench.load import Send
from bench.workload import Workload

BATCHED_MODELS: tuple[str, ...] = ("embed", "rerank", "vision", "tabular")
EMBED_DIM = 384
RERANK_TOP_N = 3
DIGIT_VARIANTS = 256
# Tenant priority the gateway gives the premium tenant; direct requests use the same.
TRITON_PRIORITY = 1
_JSON = {"Content-Type": "application/json"}
OUTPUTS: dict[str, tuple[str, ...]] = {
    "embed": ("embedding",), "rerank": ("score",), "vision": ("scores", "class_ids", "labels"),
    "tabular": ("probabilities", "class_id"),
}


class BadResponse(RuntimeError):
    """An answer arrived but was not a success or had the wrong shape."""


class RefusedResponse(BadResponse):
    """The gateway answered with an HTTP error: its ``status``, the error body's ``code`` and the
    ``Retry-After`` header in seconds (None when absent or not a number of seconds)."""

    def __init__(self, status: int, code: str | None, body: bytes, retry_after_s: float | None = None) -> None:
        super().__init__(f"HTTP {status}: {body[:200]!r}")
        self.status = status
        self.code = code
        self.retry_after_s = retry_after_s


def _bytes_column(values: list[bytes]) -> np.ndarray:
    return np.array([[v] for v in values], dtype=np.object_)


def _check(condition: bool, what: str) -> None:
    if not condition:
        raise BadResponse(what)


def gateway_http(base_url: str, api_key: str, max_connections: int = 64,
                 timeout_s: float = 30.0) -> httpx.AsyncClient:
    """An HTTP/1.1 keep-alive client for the gateway with the tenant's key on every request."""
    limits = httpx.Limits(max_connections=max_connections, max_keepalive_connections=max_connections)
    return httpx.AsyncClient(base_url=base_url, limits=limits, timeout=timeout_s,
                             headers={"Authorization": f"Bearer {api_key}"})


class GatewayClient:
    """Requests through the gateway on one pooled HTTP/1.1 keep-alive client.

    aiohttp rather than httpx: on a 2-core host the load generator shares the CPUs with the
    system under test, and httpx spends about 40 % more client CPU per request (measured: 375 vs
    513 embed req/s through the same gateway at 16 clients), which would be charged to the gateway.
    """

    def __init__(self, base_url: str, api_key: str, workload: Workload, max_connections: int = 64,
                 timeout_s: float = 30.0) -> None:
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._max_connections = max_connections
        self._timeout_s = timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._bodies: dict[str, list[tuple[bytes, dict[str, str]]]] = {
            # base64, as the official openai SDK asks by default (4 bytes per dimension, no floats to print)
            "embed": [(orjson.dumps({"model": "embed", "input": [s], "encoding_format": "base64"}), _JSON)
                      for s in workload.sentences],
            "rerank": [(orjson.dumps({"model": "rerank", "query": q, "documents": list(workload.documents),
                                      "top_n": RERANK_TOP_N}), _JSON) for q in workload.queries],
            "vision": [_kserve_binary_image(image) for image in workload.images],
            "tabular": [(orjson.dumps({"inputs": [{"name": "features", "shape": [1, 64], "datatype": "FP32",
                                                   "data": row.tolist()}]}), _JSON)
                        for row in workload.digits[:DIGIT_VARIANTS]],
        }
        self._checks: dict[str, Callable[[Any], None]] = {
            "embed": _check_embedding, "rerank": _check_rerank,
            "vision": _check_kserve("vision"), "tabular": _check_kserve("tabular"),
        }

    def sender(self, model: str) -> Send:
        """A ``Send`` for ``model`` (one of ``BATCHED_MODELS``)."""
        bodies, check = self._bodies[model], self._checks[model]
        path = {"embed": "/v1/embeddings", "rerank": "/v1/rerank"}.get(model, f"/v2/models/{model}/infer")

        async def send(i: int) -> None:
            body, headers = bodies[i % len(bodies)]
            async with self._http().post(self.base_url + path, data=body, headers=headers) as response:
                content = await response.read()
            if response.status != 200:
                raise BadResponse(f"HTTP {response.status}: {content[:200]!r}")
            check(orjson.loads(content))

        return send

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None:  # created lazily: a session belongs to the running event loop
            self._session = aiohttp.ClientSession(
                headers={"Authorization": f"Bearer {self._api_key}"},
                connector=aiohttp.TCPConnector(limit=self._max_connections),
                timeout=aiohttp.ClientTimeout(total=self._timeout_s))
        return self._session

    async def aclose(self) -> None:
        if self._session is not None:
            await self._session.close()


def _kserve_binary_image(image: bytes) -> tuple[bytes, dict[str, str]]:
    """A KServe v2 body carrying the image as a BYTES tensor in Triton's binary extension."""
    tensor = httpclient.InferInput("image", [1, 1], "BYTES")
    tensor.set_data_from_numpy(_bytes_column([image]), binary_data=True)
    outputs = [httpclient.InferRequestedOutput(n, binary_data=False) for n in OUTPUTS["vision"]]
    body, json_size = httpclient.InferenceServerClient.generate_request_body([tensor], outputs)
    headers = {"Content-Type": "application/octet-stream"}
    if json_size is not None:
        headers["Inference-Header-Content-Length"] = str(json_size)
    return body, headers


def _check_embedding(answer: Any) -> None:
    data = answer.get("data") or [{}]
    vector = np.frombuffer(base64.b64decode(data[0].get("embedding", "")), dtype="<f4")
    _check(len(data) == 1 and vector.shape == (EMBED_DIM,), "embedding shape")


def _check_rerank(answer: Any) -> None:
    _check(len(answer.get("results", ())) == RERANK_TOP_N, "rerank results")


def _check_kserve(model: str) -> Callable[[Any], None]:
    def check(answer: Any) -> None:
        shapes = {o.get("name"): o.get("shape", [0])[0] for o in answer.get("outputs", ())}
        _check(all(shapes.get(name) == 1 for name in OUTPUTS[model]), f"{model} outputs {shapes}")

    return check


class DirectClient:
    """Requests straight to a Triton worker over gRPC (what the gateway itself uses)."""

    def __init__(self, grpc_url: str, workload: Workload, timeout_s: float = 30.0) -> None:
        self.grpc = grpcclient.InferenceServerClient(grpc_url)
        self.timeout_s = timeout_s
        docs = list(workload.documents)
        self._inputs: dict[str, list[list[grpcclient.InferInput]]] = {
            "embed": [[_tensor("text", _bytes_column([s.encode()]))] for s in workload.sentences],
            "rerank": [[_tensor("query", _bytes_column([q.encode()] * len(docs))),
                        _tensor("document", _bytes_column([d.encode() for d in docs]))]
                       for q in workload.queries],
            "vision": [[_tensor("image", _bytes_column([image]))] for image in workload.images],
            "tabular": [[_tensor("features", row.reshape(1, -1))] for row in workload.digits[:DIGIT_VARIANTS]],
        }
        self._rows = {"embed": 1, "rerank": len(docs), "vision": 1, "tabular": 1}

    def sender(self, model: str) -> Send:
        """A ``Send`` for ``model`` (one of ``BATCHED_MODELS``)."""
        variants, rows = self._inputs[model], self._rows[model]
        requested = [grpcclient.InferRequestedOutput(n) for n in OUTPUTS[model]]

        async def send(i: int) -> None:
            result = await self.grpc.infer(model, variants[i % len(variants)], outputs=requested,
                                           priority=TRITON_PRIORITY, client_timeout=self.timeout_s)
            for name in OUTPUTS[model]:
                array = result.as_numpy(name)
                _check(array is not None and array.shape[0] == rows, f"{model} output {name}")

        return send

    async def aclose(self) -> None:
        await self.grpc.close()


def _tensor(name: str, value: np.ndarray) -> grpcclient.InferInput:
    datatype = "BYTES" if value.dtype == np.object_ else "FP32"
    tensor = grpcclient.InferInput(name, list(value.shape), datatype)
    tensor.set_data_from_numpy(value)
    return tensor
