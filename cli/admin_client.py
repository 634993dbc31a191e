"""The control admin API (``/admin/v1``) over HTTP, as the operator CLI calls it.

One method per endpoint; each returns the parsed JSON body. Every request carries the operator's
bearer token; control writes that token's name into its audit log. Reads time out
after ``timeout_s`` (30 s); registering a version (control downloads and verifies the artifact) and
rollout actions (they wait for loads and drains) after ``long_timeout_s`` (600 s).

Errors::

    AdminApiError   control refused the call (``status`` 4xx/5xx, ``code`` and ``message`` from its
                    ``{"error": {...}}`` body), or could not be reached (``status`` 0)
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Literal
from urllib.parse import quote

# httpx imports its own command-line client (click, rich.syntax, pygments: about 80 ms) whenever
# click is installed, which typer makes it; the CLI never runs it. A None entry makes that import
# fail, and httpx then defines a stub instead (its documented fallback when the extras are missing).
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
import httpx  # noqa: E402

DEFAULT_CONTROL_URL = "http://127.0.0.1:8081"
DEFAULT_TIMEOUT_S = 30.0
LONG_TIMEOUT_S = 600.0
ROLLOUT_ACTIONS = ("pause", "resume", "rollback")

Sticky = Literal["request", "tenant", "user"]


class AdminApiError(Exception):
    """Control answered with an error (``status`` >= 400) or was not reachable (``status`` 0)."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message

    def __repr__(self) -> str:
        return f"AdminApiError(status={self.status}, code={self.code!r}, message={self.message!r})"


def _error_from_response(response: httpx.Response) -> AdminApiError:
    """The documented ``{"error": {"message", "type", "code"}}`` body, or the best the body gives."""
    status = response.status_code
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    error = body.get("error") if isinstance(body, dict) else None
    if isinstance(error, dict) and isinstance(error.get("message"), str):
        code = error.get("code") or error.get("type") or f"http_{status}"
        return AdminApiError(status, str(code), error["message"])
    if isinstance(body, dict) and "detail" in body:
        return AdminApiError(status, f"http_{status}", str(body["detail"]))
    text = response.text.strip()[:500] or response.reason_phrase
    return AdminApiError(status, f"http_{status}", f"control answered HTTP {status}: {text}")


def _segment(value: str | int) -> str:
    """One URL path segment; a model name never changes the path's shape."""
    return quote(str(value), safe="")


class AdminClient:
    """Blocking client of the control admin API; use as a context manager or call ``close()``."""

    def __init__(self, base_url: str, token: str, *, timeout_s: float = DEFAULT_TIMEOUT_S,
                 long_timeout_s: float = LONG_TIMEOUT_S, transport: httpx.BaseTransport | None = None) -> None:
        self.base_url = base_url.rstrip("/")
        self.long_timeout_s = long_timeout_s
        headers = {"Authorization": f"Bearer {token}"}
        self._http = httpx.Client(base_url=self.base_url, headers=headers, timeout=timeout_s, transport=transport)

    def __enter__(self) -> AdminClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def _call(self, method: str, path: str, *, body: Mapping[str, Any] | None = None,
              params: Mapping[str, Any] | None = None, long: bool = False) -> Any:
        timeout = self.long_timeout_s if long else httpx.USE_CLIENT_DEFAULT
        try:
            response = self._http.request(method, path, json=body, params=params, timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as exc:
            raise AdminApiError(0, "unreachable", f"control API at {self.base_url} not reachable: {exc} "
                                                  "(is `shunter up` running?)") from exc
        except httpx.TimeoutException as exc:
            raise AdminApiError(0, "timeout", f"control API at {self.base_url} did not answer {method} {path} "
                                              f"in time: {exc!r}") from exc
        except httpx.TransportError as exc:
            raise AdminApiError(0, "unreachable", f"control API at {self.base_url} failed: {exc!r} "
                                                  "(is `shunter up` running?)") from exc
        if response.status_code >= 400:
            raise _error_from_response(response)
        try:
            return response.json()
        except ValueError as exc:
            raise AdminApiError(response.status_code, "bad_response",
                                f"control answered {method} {path} with a body that is not JSON") from exc

    def list_models(self) -> list[dict[str, Any]]:
        return self._call("GET", "/admin/v1/models")

    def versions(self, model: str) -> list[dict[str, Any]]:
        return self._call("GET", f"/admin/v1/models/{_segment(model)}/versions")

    def delete_version(self, model: str, version: int, reason: str = "") -> dict[str, Any]:
        return self._call("DELETE", f"/admin/v1/models/{_segment(model)}/versions/{_segment(version)}",
                          params={"reason": reason})

    def prune(self, dry_run: bool, reason: str = "") -> dict[str, Any]:
        return self._call("POST", "/admin/v1/prune", body={"dry_run": dry_run, "reason": reason}, long=True)

    def register_version(self, model: str, version: int, artifact_uri: str, requirements: Mapping[str, Any],
                         reason: str = "") -> dict[str, Any]:
        """Register an uploaded artifact; control downloads and verifies it first (hence the long timeout)."""
        body = {"version": version, "artifact_uri": artifact_uri, "requirements": dict(requirements),
                "reason": reason}
        return self._call("POST", f"/admin/v1/models/{_segment(model)}/versions", body=body, long=True)

    def start_canary(self, model: str, to: int, percent: float, sticky: Sticky = "request",
                     reason: str = "") -> dict[str, Any]:
        body = {"to": to, "percent": percent, "sticky": sticky, "reason": reason}
        return self._call("POST", f"/admin/v1/rollouts/{_segment(model)}/canary", body=body, long=True)

    def start_ab(self, model: str, variants: Mapping[int, float], sticky: Sticky = "tenant",
                 reason: str = "") -> dict[str, Any]:
        body = {"variants": {str(v): w for v, w in variants.items()}, "sticky": sticky, "reason": reason}
        return self._call("POST", f"/admin/v1/rollouts/{_segment(model)}/ab", body=body, long=True)

    def rollout_action(self, model: str, action: str, reason: str = "") -> dict[str, Any]:
        """``action`` is one of ``ROLLOUT_ACTIONS``."""
        if action not in ROLLOUT_ACTIONS:
            raise ValueError(f"rollout action must be one of {', '.join(ROLLOUT_ACTIONS)}, got {action!r}")
        return self._call("POST", f"/admin/v1/rollouts/{_segment(model)}/{action}", body={"reason": reason},
                          long=True)

    def promote(self, model: str, to: int | None = None, reason: str = "") -> dict[str, Any]:
        """Finish the rollout: ``to`` (default the largest candidate) takes all traffic."""
        return self._call("POST", f"/admin/v1/rollouts/{_segment(model)}/promote",
                          body={"to": to, "reason": reason}, long=True)

    def undo(self, model: str, to: int | None = None, reason: str = "") -> dict[str, Any]:
        """Bring back the previous live version (or ``to``); waits for load, warmup and drain."""
        return self._call("POST", f"/admin/v1/rollouts/{_segment(model)}/undo", body={"to": to, "reason": reason},
                          long=True)

    def rollout_status(self, model: str) -> dict[str, Any]:
        return self._call("GET", f"/admin/v1/rollouts/{_segment(model)}")

    def trusted_keys(self) -> list[dict[str, Any]]:
        return self._call("GET", "/admin/v1/keys")

    def trust_key(self, name: str, public_key_pem: str, reason: str = "") -> dict[str, Any]:
        body = {"public_key_pem": public_key_pem, "reason": reason}
        return self._call("PUT", f"/admin/v1/keys/{_segment(name)}", body=body)

    def untrust_key(self, name: str, reason: str = "") -> dict[str, Any]:
        return self._call("DELETE", f"/admin/v1/keys/{_segment(name)}", params={"reason": reason})

    def audit(self, subject: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """Audit entries, newest first; only those about ``subject`` when given."""
        params: dict[str, Any] = {"limit": limit}
        if subject is not None:
            params["subject"] = subject
        return self._call("GET", "/admin/v1/audit", params=params)

    # ---- operator tokens (``shunter tokens``) ------------------------------------------------------

    def tokens(self) -> list[dict[str, Any]]:
        return self._call("GET", "/admin/v1/tokens")

    def create_token(self, name: str, role: str, reason: str = "") -> dict[str, Any]:
        """A new token; the answer's ``token`` is the only copy control ever gives out."""
        return self._call("POST", "/admin/v1/tokens", body={"name": name, "role": role, "reason": reason})

    def revoke_token(self, name: str, reason: str = "") -> dict[str, Any]:
        return self._call("DELETE", f"/admin/v1/tokens/{_segment(name)}", params={"reason": reason})

    # ---- capacity (``shunter scale``) -------------------------------------------------------------

    def capacity_status(self) -> dict[str, Any]:
        return self._call("GET", "/admin/v1/capacity")

    def set_capacity(self, model: str, pool: str, min_replicas: int, max_replicas: int,
                     reason: str = "") -> dict[str, Any]:
        body = {"min_replicas": min_replicas, "max_replicas": max_replicas, "reason": reason}
        return self._call("PUT", f"/admin/v1/capacity/{_segment(model)}/{_segment(pool)}", body=body)

    def override_capacity(self, model: str, pool: str, replicas: int, for_s: float, reason: str) -> dict[str, Any]:
        body = {"replicas": replicas, "for_s": for_s, "reason": reason}
        return self._call("POST", f"/admin/v1/capacity/{_segment(model)}/{_segment(pool)}/override", body=body)
