"""Who may read ``/metrics``: it lists tenant names and traffic, so an operator can close it.

``MetricsAccessMiddleware`` applies ``gateway.yaml``'s two settings. With a token
(``metrics_token_file``), ``/metrics`` answers only ``Authorization: Bearer <token>`` (401
otherwise; compared in constant time). With an address of its own (``metrics_listen``), the
gateway also listens there (``python -m gateway`` opens the socket); ``/metrics`` answers only on
that address (404 on the API port), and that address serves nothing but ``/metrics``,
``/healthz`` and ``/readyz``.
"""

from __future__ import annotations

import hmac

from starlette.types import ASGIApp, Receive, Scope, Send

from gateway.context import send_error
from gateway.errors import AuthenticationError, RouteNotFoundError

METRICS_PATH = "/metrics"
_METRICS_PORT_PATHS = frozenset({METRICS_PATH, "/healthz", "/readyz"})


class MetricsAccessMiddleware:
    def __init__(self, app: ASGIApp, token: str | None, metrics_port: int | None) -> None:
        self.app = app
        self.token = token.encode() if token else None
        self.metrics_port = metrics_port

    def _on_metrics_port(self, scope: Scope) -> bool:
        server = scope.get("server")
        return self.metrics_port is not None and server is not None and server[1] == self.metrics_port

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        if self.metrics_port is not None:
            on_port = self._on_metrics_port(scope)
            if (on_port and path not in _METRICS_PORT_PATHS) or (not on_port and path == METRICS_PATH):
                await send_error(scope, receive, send, RouteNotFoundError(f"no route {path} on this address"))
                return
        if path == METRICS_PATH and self.token is not None and not self._authorized(scope):
            await send_error(scope, receive, send,
                             AuthenticationError("/metrics needs 'Authorization: Bearer <metrics token>'"))
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        assert self.token is not None
        for name, value in scope.get("headers", ()):
            if name == b"authorization":
                scheme, _, given = value.partition(b" ")
                return scheme.lower() == b"bearer" and hmac.compare_digest(given.strip(), self.token)
        return False
