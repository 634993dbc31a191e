"""``Idempotency-Key`` with the semantics of the IETF draft, across every gateway of the fleet.

A POST that carries the header is claimed in the state store under (tenant, key) with a
fingerprint of its method, path and body:

- the first request with the key runs; when it ends with a non-streamed response below 500, that
  response (status, body bytes, media type) is stored for ``ttl_s``; a 5xx, an exception or a
  client that left releases the key, so a retry may run;
- a repeat while the first still runs: 409 ``idempotency_in_progress`` with ``Retry-After``;
- a repeat after it finished: the stored response, byte for byte, with ``idempotent-replayed:
  true`` and the first request's id in ``x-original-request-id``; nothing reaches a worker;
- the same key with another body: 422 ``idempotency_key_reused``;
- a streamed response is not stored: a repeat of a streamed request gets 409
  ``idempotency_stream_not_replayable``.

Keys are scoped per tenant, so one tenant never sees another's response. The middleware
authenticates the key only to find the tenant; a request whose API key is unknown, or whose
header is malformed, passes through to the routes, which refuse it (401, 400). When the store is
unavailable the request runs without the guarantee (the store logs the transition).
Written by hand: no ASGI library implements the draft.
"""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import dataclass, field

from starlette.requests import HTTPConnection
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from gateway.composition import gateway_of
from gateway.context import idempotency_key, request_context
from gateway.errors import ConflictError, GatewayError, UnprocessableError
from gateway.responses import JSONResponse
from gateway.state_store.protocol import ClaimState, StateStore, StoredResponse, StoreUnavailable
from scheduling.tenants import Tenant
from settings.tenants import TenantDirectory

_MAX_BODY_MESSAGES = 1_000_000
_SSE = b"text/event-stream"
_REPLAYED_HEADERS = ("x-shunter-pool", "x-shunter-model-version", "x-queue-wait-ms")


def fingerprint(method: str, path: str, body: bytes) -> str:
    """What makes two requests with one key "the same request"."""
    digest = hashlib.sha256()
    for part in (method.encode(), b"\0", path.encode(), b"\0", body):
        digest.update(part)
    return digest.hexdigest()


@dataclass
class _Recorder:
    """The inner app's response as it is sent: status, kept headers, body, and whether it streams."""

    send: Send
    status: int = 0
    media_type: str = ""
    headers: list[tuple[str, str]] = field(default_factory=list)
    body: list[bytes] = field(default_factory=list)
    streamed: bool = False
    finished: bool = False

    async def __call__(self, message: Message) -> None:
        if message["type"] == "http.response.start":
            self.status = message["status"]
            for name, value in message.get("headers", ()):
                if name == b"content-type":
                    self.media_type = value.decode("latin-1")
                    self.streamed = value.startswith(_SSE)
                elif name.decode("latin-1") in _REPLAYED_HEADERS:
                    self.headers.append((name.decode("latin-1"), value.decode("latin-1")))
        elif message["type"] == "http.response.body":
            if not self.streamed:
                self.body.append(message.get("body", b""))
            self.finished = not message.get("more_body", False)
        await self.send(message)


class IdempotencyMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST" or not idempotency_key(scope):
            await self.app(scope, receive, send)
            return
        connection = HTTPConnection(scope)
        gateway = gateway_of(connection)
        tenant = _tenant(connection, gateway.tenants)
        if tenant is None:
            await self.app(scope, receive, send)
            return
        body = await _read_body(receive)
        await self._guarded(scope, _replay(body, receive), send, gateway.store, tenant, body)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send, store: StateStore, tenant: Tenant,
                       body: bytes) -> None:
        connection = HTTPConnection(scope)
        context = request_context(connection)
        key = idempotency_key(scope) or ""
        ttl_s = gateway_of(connection).settings.idempotency_ttl_s
        try:
            claim = await store.claim(tenant.name, key, fingerprint(scope["method"], scope["path"], body),
                                      context.request_id, ttl_s)
        except StoreUnavailable:
            await self.app(scope, receive, send)
            return
        if claim.state is ClaimState.DONE and claim.response is not None:
            await _send_stored(claim.response, send)
        elif claim.state is ClaimState.OWNER:
            await self._run_as_owner(scope, receive, send, store, tenant.name, key, ttl_s)
        else:
            error = _refusal(claim.state, claim.request_id)
            context.ending = error.ending
            await JSONResponse(error.body(), status_code=error.status, headers=error.headers())(scope, receive, send)

    async def _run_as_owner(self, scope: Scope, receive: Receive, send: Send, store: StateStore, tenant: str,
                            key: str, ttl_s: float) -> None:
        request_id = request_context(HTTPConnection(scope)).request_id
        recorder = _Recorder(send)
        stored: StoredResponse | None = None
        try:
            await self.app(scope, receive, recorder)
            if recorder.finished and recorder.streamed:
                error = ConflictError("a streamed response cannot be replayed; send a new Idempotency-Key",
                                      code="idempotency_stream_not_replayable")
                stored = StoredResponse(error.status, bytes(JSONResponse(error.body()).body), "application/json",
                                        request_id=request_id)
            elif recorder.finished and recorder.status < 500:
                stored = StoredResponse(recorder.status, b"".join(recorder.body), recorder.media_type,
                                        tuple(recorder.headers), request_id)
        finally:
            await asyncio.shield(_settle(store, tenant, key, request_id, stored, ttl_s))


async def _settle(store: StateStore, tenant: str, key: str, request_id: str, stored: StoredResponse | None,
                  ttl_s: float) -> None:
    try:
        if stored is not None:
            await store.complete(tenant, key, request_id, stored, ttl_s)
        else:
            await store.abandon(tenant, key, request_id)
    except StoreUnavailable:
        pass  # the key expires with its TTL


def _tenant(connection: HTTPConnection, tenants: TenantDirectory) -> Tenant | None:
    scheme, _, api_key = connection.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not api_key.strip():
        return None
    return tenants.authenticate(api_key.strip())


async def _read_body(receive: Receive) -> bytes:
    parts: list[bytes] = []
    for _ in range(_MAX_BODY_MESSAGES):
        message = await receive()
        if message["type"] != "http.request":
            break
        parts.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(parts)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that gives the buffered body once, then the client's next messages (disconnect)."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replay() -> Message:
        return pending.pop() if pending else await receive()

    return replay


def _refusal(state: ClaimState, owner: str) -> GatewayError:
    if state is ClaimState.IN_PROGRESS:
        return ConflictError(f"a request with this Idempotency-Key is still running ({owner}); retry when it "
                             "has finished", code="idempotency_in_progress", retry_after_s=1)
    return UnprocessableError("this Idempotency-Key was used with a different request body",
                              param="Idempotency-Key", code="idempotency_key_reused")


async def _send_stored(response: StoredResponse, send: Send) -> None:
    headers = [(b"content-type", response.media_type.encode("latin-1")),
               (b"content-length", str(len(response.body)).encode()),
               (b"idempotent-replayed", b"true"),
               (b"x-original-request-id", response.request_id.encode("latin-1")),
               *((name.encode("latin-1"), value.encode("latin-1")) for name, value in response.headers)]
    await send({"type": "http.response.start", "status": response.status, "headers": headers})
    await send({"type": "http.response.body", "body": response.body, "more_body": False})
