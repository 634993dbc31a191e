"""Open-loop replay of a chat trace through the gateway, with the real time of each first token.

``replay(gateway_url, trace)`` sends every request of the trace (``bench.studies.fidelity_trace``) at its
``arrival_s`` after the start, whatever happened to the others, as an OpenAI streaming chat
completion (greedy, ``max_tokens`` from the trace, usage included) with its tenant's demo key,
and returns one ``ReplayResult`` per request: HTTP status, time to the first chunk carrying text
(measured at the client, from the moment the request is sent), end time, completion tokens and
finish reason, or the error, and how long the gateway's queue held it (``GET /v1/requests/{id}``
after the whole trace, the id read off the stream's chunks). Every request is bounded by
``request_timeout_s``.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

import httpx
import orjson

from bench.studies.fidelity_trace import API_KEYS

CHUNK_ID_PREFIX = "chatcmpl-"  # gateway/routes/openai.py: chunk ids are the request id behind this


@dataclass(frozen=True)
class ReplayResult:
    request_id: str
    tenant: str
    sent_s: float  # from the replay's start
    status: int  # 0: no HTTP answer (transport error or timeout)
    ttft_s: float | None = None
    end_s: float | None = None  # from the request's send
    completion_tokens: int = 0
    finish_reason: str | None = None
    error: str = ""
    gateway_id: str | None = None  # the gateway's request id (GET /v1/requests/{id})
    gateway_queue_s: float | None = None  # admission to dispatch, as the gateway recorded it


def chat_body(item: dict[str, Any]) -> bytes:
    return orjson.dumps({"model": "chat", "stream": True, "stream_options": {"include_usage": True},
                         "max_tokens": item["max_tokens"], "temperature": 0, "messages": item["messages"]})


async def _read_stream(response: httpx.Response, started: float) -> dict[str, Any]:
    """TTFT, usage and finish reason of one SSE stream; ``error`` set on an error event."""
    seen: dict[str, Any] = {"ttft_s": None, "completion_tokens": 0, "finish_reason": None, "error": "",
                            "gateway_id": None}
    async for line in response.aiter_lines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        event = orjson.loads(data)
        if seen["gateway_id"] is None and str(event.get("id", "")).startswith(CHUNK_ID_PREFIX):
            seen["gateway_id"] = "req_" + str(event["id"]).removeprefix(CHUNK_ID_PREFIX)
        if "error" in event:
            seen["error"] = str(event["error"])[:300]
            break
        for choice in event.get("choices") or []:
            if choice.get("delta", {}).get("content") and seen["ttft_s"] is None:
                seen["ttft_s"] = time.perf_counter() - started
            seen["finish_reason"] = choice.get("finish_reason") or seen["finish_reason"]
        if event.get("usage"):
            seen["completion_tokens"] = int(event["usage"]["completion_tokens"])
    return seen


async def send_one(http: httpx.AsyncClient, item: dict[str, Any], start: float,
                   request_timeout_s: float) -> ReplayResult:
    """Wait for the item's arrival time, send it, read it to the end."""
    await asyncio.sleep(max(0.0, start + item["arrival_s"] - time.perf_counter()))
    sent = time.perf_counter()
    base = {"request_id": item["request_id"], "tenant": item["tenant"], "sent_s": sent - start}
    headers = {"Authorization": f"Bearer {API_KEYS[item['tenant']]}", "Content-Type": "application/json"}
    try:
        async with asyncio.timeout(request_timeout_s), \
                http.stream("POST", "/v1/chat/completions", content=chat_body(item), headers=headers) as response:
            if response.status_code != 200:
                body = (await response.aread())[:300].decode(errors="replace")
                return ReplayResult(**base, status=response.status_code, error=body)
            seen = await _read_stream(response, sent)
    except (httpx.HTTPError, TimeoutError) as exc:
        return ReplayResult(**base, status=0, error=f"{type(exc).__name__}: {exc}"[:300])
    return ReplayResult(**base, status=200, end_s=time.perf_counter() - sent, **seen)


async def replay(gateway_url: str, trace: list[dict[str, Any]], request_timeout_s: float = 180.0) -> list[ReplayResult]:
    """See the module docstring; results in trace order."""
    limits = httpx.Limits(max_connections=len(trace) + 4, max_keepalive_connections=len(trace) + 4)
    async with httpx.AsyncClient(base_url=gateway_url, limits=limits, timeout=request_timeout_s) as http:
        start = time.perf_counter()
        results = await asyncio.gather(*(send_one(http, item, start, request_timeout_s) for item in trace))
        return [await _with_queue_wait(http, result) for result in results]


async def _with_queue_wait(http: httpx.AsyncClient, result: ReplayResult) -> ReplayResult:
    """``result`` with the gateway's recorded queue wait (unchanged when it has no id or no record)."""
    if result.gateway_id is None:
        return result
    try:
        answer = await http.get(f"/v1/requests/{result.gateway_id}",
                                headers={"Authorization": f"Bearer {API_KEYS[result.tenant]}"})
        wait = answer.json().get("queue_wait_s") if answer.status_code == 200 else None
    except (httpx.HTTPError, ValueError):
        return result
    return replace(result, gateway_queue_s=wait) if isinstance(wait, (int, float)) else result


async def warm_up(gateway_url: str, item: dict[str, Any]) -> ReplayResult:
    """One request alone (first-request costs of the gateway and the engine stay out of the replay)."""
    async with httpx.AsyncClient(base_url=gateway_url, timeout=120.0) as http:
        return await send_one(http, {**item, "arrival_s": 0.0}, time.perf_counter(), 120.0)
