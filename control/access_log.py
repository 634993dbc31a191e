"""Control's access log: one JSON line per admin or metrics request (``settings/access_log.py``).

A pure ASGI middleware: method, route (the route's template, never a client's raw path), status,
duration and, for a request that raised, the exception's type and where. Never a body, a header
or the admin token. Scrapes of ``/metrics`` and Prometheus' target discovery that succeed are not
logged (Prometheus would fill the log).
"""

from __future__ import annotations

import time
import traceback

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from settings.access_log import AccessLog

_QUIET_PATHS = frozenset({"/metrics", "/admin/v1/prometheus/targets"})


class ControlAccessLogMiddleware:
    def __init__(self, app: ASGIApp, access_log: AccessLog) -> None:
        self.app = app
        self.access_log = access_log

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        error = ""

        async def observed_send(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, observed_send)
        except Exception as exc:
            frames = traceback.extract_tb(exc.__traceback__)
            where = f"{frames[-1].filename}:{frames[-1].lineno} in {frames[-1].name}" if frames else "?"
            error, status = f"raised {type(exc).__name__} at {where}", 500
            raise
        finally:
            self._write(scope, status, time.perf_counter() - started, error)

    def _write(self, scope: Scope, status: int, duration_s: float, error: str) -> None:
        route = getattr(scope.get("route"), "path", None)
        if route in _QUIET_PATHS and status < 400:
            return
        fields: dict[str, object] = {"component": "control", "method": scope.get("method", ""),
                                     "route": route if isinstance(route, str) else "-", "status": status,
                                     "duration_ms": round(duration_s * 1000, 2)}
        if error:
            fields["error"] = error
        self.access_log.write(fields)
