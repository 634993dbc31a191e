"""The gateway's access-log record: what one request was, who sent it, where it ran, how it ended.

``access_fields`` builds the fields of the one JSON line ``RequestContextMiddleware`` writes per
request (``settings/access_log.py`` writes it): request id, method, route, status, outcome and
reason, tenant, model and version, pool and worker, queue wait, time to first token, duration,
tokens in and out, dispatch attempts, cache use, the trace id when tracing is on, and for a 500 the
exception's type and where it was raised. Never a prompt, an output, a header or a key: only
identifiers the gateway made or configured, codes and numbers. A path that matches no route is
logged as ``-`` (a client's text, bounded labels).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from starlette.types import Scope

from gateway.outcomes import Ending

if TYPE_CHECKING:
    from gateway.context import RequestContext

UNROUTED = "-"


def _ms(seconds: float | None) -> float | None:
    return None if seconds is None else round(seconds * 1000, 2)


def access_fields(scope: Scope, context: RequestContext, status: int, ending: Ending, duration_s: float,
                  failure: str, model_label: str) -> dict[str, object]:
    """The access-log line of one finished request (``failure``: where an unmapped exception was raised)."""
    route = getattr(scope.get("route"), "path", None)
    ticket = context.ticket
    dispatch = ticket.dispatch if ticket is not None else context.dispatch
    fields: dict[str, object] = {
        "request_id": context.request_id, "method": scope.get("method", ""),
        "route": route if isinstance(route, str) else UNROUTED, "status": status,
        "outcome": ending.outcome.value, "reason": ending.reason, "tenant": context.tenant,
        "tier": context.tier, "model": model_label or None, "version": context.model_version,
        "pool": dispatch.pool if dispatch is not None else ("cache" if context.cache == "hit" else None),
        "worker": dispatch.worker_id if dispatch is not None else None,
        "queue_wait_ms": _ms(dispatch.queue_wait_s) if dispatch is not None else None,
        "ttft_ms": _ms(context.ttft_s), "duration_ms": _ms(duration_s),
        "tokens_in": context.tokens_in, "tokens_out": ticket.generated_tokens if ticket is not None else None,
        "attempts": ticket.attempts if ticket is not None else None, "cache": context.cache,
    }
    if context.trace_id is not None:
        fields["trace_id"] = context.trace_id
    if failure:
        fields["error"] = failure.strip()
    return {key: value for key, value in fields.items() if value is not None}
