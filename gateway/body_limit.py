"""Request bodies: the API key checked first, then the body read under a size limit, before any
route parses it.

``BodyLimitMiddleware`` sits between the request context and the routes. For a request that
carries a body to an authenticated route (``/v1/...``, ``/v2/models/...``) it checks the API key
before reading a byte (a missing or unknown key: 401 at once, the body left unread). It then
reads the body while counting: a declared ``Content-Length`` over the limit, or a body that
grows past it, is answered 413 ``payload_too_large`` as soon as that is known, without reading
the rest (the server closes the connection). A body within the limit is handed to the app
as one message, so nothing downstream reads from the socket again. Limits: ``max_kserve_body_bytes``
for KServe v2 inference (binary tensors), ``max_body_bytes`` for every other route.

The JSON of a body is parsed and validated on the event loop, in one C call each that no thread
could interrupt, and their cost grows with the number of JSON values, not bytes (4 MB of ``{},``
took 0.8 s to parse here, 140,000 chat messages 1.6 s to validate). So before anything parses it,
the JSON part (the whole body, or a KServe body's JSON header) is bounded by byte counts
(about 2 ms for 4 MB): at most ``max_json_objects`` ``{`` and at most ``max_json_values``
``,``, ``{`` and ``[`` together (characters inside strings count too: the bound errs on the safe
side), else 400 ``too_many_values``.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.context import send_error
from gateway.errors import AuthenticationError, InvalidRequestError, PayloadTooLargeError
from scheduling.tenants import Tenant
from settings.gateway import GatewaySettings

_BODY_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def kserve_inference(path: str) -> bool:
    """Whether ``path`` is a KServe v2 inference route (its larger limit applies)."""
    return path.startswith("/v2/models/") and path.endswith("/infer")


def needs_api_key(path: str) -> bool:
    """Whether every route under ``path`` authenticates (health, metrics and metadata do not)."""
    return path.startswith("/v1/") or path.startswith("/v2/models/")


def _header(scope: Scope, wanted: bytes) -> bytes | None:
    for name, value in scope.get("headers", ()):
        if name == wanted:
            return bytes(value)
    return None


def _declared_length(scope: Scope) -> int | None:
    value = _header(scope, b"content-length")
    return int(value) if value is not None and value.isdigit() else None


def json_part(scope: Scope, body: bytes) -> bytes:
    """The part of ``body`` that will be parsed as JSON (a KServe binary body's JSON header)."""
    header = _header(scope, b"inference-header-content-length")
    return body[:int(header)] if header is not None and header.isdigit() else body


def _has_body(scope: Scope) -> bool:
    if scope["method"] not in _BODY_METHODS:
        return False
    for name, value in scope.get("headers", ()):
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return True
    return False


def _api_key(scope: Scope) -> str:
    for name, value in scope.get("headers", ()):
        if name == b"authorization":
            scheme, _, key = value.decode("latin-1").partition(" ")
            return key.strip() if scheme.lower() == "bearer" else ""
    return ""


def _occurrences(data: np.ndarray, byte: bytes) -> int:
    return int(np.count_nonzero(data == ord(byte)))


def json_cost_error(document: bytes, max_objects: int, max_values: int) -> InvalidRequestError | None:
    """The refusal of a JSON document with more objects or values than allowed (upper bounds from
    byte counts), or None. Counted with numpy: 4 MB in about 2 ms, where three ``bytes.count``
    took 24 ms of the event loop (``python -m bench loop_lag``)."""
    data = np.frombuffer(document, dtype=np.uint8)
    objects = _occurrences(data, b"{")
    values = objects + _occurrences(data, b"[") + _occurrences(data, b",")
    if objects <= max_objects and values <= max_values:
        return None
    return InvalidRequestError(
        f"the JSON body is too complex: at most {max_objects} objects and {max_values} values "
        f"(commas, objects and arrays counted) per request; it has up to {objects} and {values}",
        param="body", code="too_many_values")


class BodyLimitMiddleware:
    def __init__(self, app: ASGIApp, authenticate: Callable[[str], Tenant | None], settings: GatewaySettings) -> None:
        self.app = app
        self.authenticate = authenticate
        self.settings = settings

    def limit_for(self, path: str) -> int:
        settings = self.settings
        return settings.max_kserve_body_bytes if kserve_inference(path) else settings.max_body_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or not _has_body(scope):
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if needs_api_key(path):
            key = _api_key(scope)
            if not key:
                await send_error(scope, receive, send,
                                 AuthenticationError("missing API key: send 'Authorization: Bearer <key>'"))
                return
            if self.authenticate(key) is None:
                await send_error(scope, receive, send, AuthenticationError("invalid API key"))
                return
        limit = self.limit_for(path)
        declared = _declared_length(scope)
        if declared is not None and declared > limit:
            await send_error(scope, receive, send, _too_large(declared, limit))
            return
        body = await _read_within(receive, limit)
        if body is None:
            return  # the client went away while sending
        if isinstance(body, int):
            await send_error(scope, receive, send, _too_large(body, limit))
            return
        complex_json = json_cost_error(json_part(scope, body), self.settings.max_json_objects,
                                       self.settings.max_json_values)
        if complex_json is not None:
            await send_error(scope, receive, send, complex_json)
            return
        await self.app(scope, _replay(body, receive), send)


def _too_large(size: int, limit: int) -> PayloadTooLargeError:
    return PayloadTooLargeError(f"the request body is larger than this route's limit of {limit} bytes "
                                f"(at least {size} bytes were sent)", param="body")


async def _read_within(receive: Receive, limit: int) -> bytes | int | None:
    """The whole body if it fits ``limit``; the byte count read so far once it does not; None if
    the client disconnected."""
    parts: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return size
        parts.append(chunk)
        if not message.get("more_body", False):
            return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the buffered body once, then the client's next messages (disconnect)."""
    pending: list[Message] = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay
