"""The OpenAI-compatible routes in-process: wire shapes, SSE framing, token counting, errors."""

from __future__ import annotations

import base64

import numpy as np
import orjson
import pytest

from gateway.errors import UnavailableError, UpstreamError
from gateway.transport.protocol import TextChunk
from scheduling.traffic_split import StickyTo, TrafficSplit
from tests.unit.gateway.conftest import BATCH, PREMIUM, STANDARD, InProcessGateway
from tests.unit.gateway.fake_transport import fake_vector

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "What is the capital of France?"}]}


def _events(body: str) -> list[str]:
    return [line.removeprefix("data: ") for line in body.splitlines() if line.startswith("data: ")]


async def test_chat_completion_joins_the_chunks_and_reports_usage(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json=CHAT)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["choices"][0]["message"] == {"role": "assistant", "content": "Paris is the capital."}
    assert body["choices"][0]["finish_reason"] == "stop"
    assert body["usage"] == {"prompt_tokens": 20, "completion_tokens": 4, "total_tokens": 24}
    assert body["id"] == "chatcmpl-" + response.headers["x-request-id"].removeprefix("req_")
    assert response.headers["x-shunter-pool"] == "local-cpu"
    assert response.headers["x-shunter-model-version"] == "1"


async def test_the_prompt_is_counted_with_the_models_tokenizer_and_sent_with_the_tier_priority(
        gw: InProcessGateway) -> None:
    await gw.client.post("/v1/chat/completions", headers=PREMIUM, json={**CHAT, "max_tokens": 7, "seed": 3})
    (generation,) = gw.workers.generations
    tokenizer = gw.gateway.models.llm_tokenizers["chat"]
    assert generation.request.prompt_tokens == len(tokenizer.tokens(generation.request.prompt))
    assert "What is the capital of France?" in generation.request.prompt
    assert generation.request.max_tokens == 7 and generation.request.seed == 3
    assert generation.request.priority == 1  # premium: Triton's most urgent level
    assert generation.worker_id == "local-cpu-0" and generation.version == 1


async def test_streamed_chat_is_role_chunk_content_chunks_usage_then_done(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD,
                                    json={**CHAT, "stream": True, "stream_options": {"include_usage": True}})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response.text)
    assert events[-1] == "[DONE]"
    chunks = [orjson.loads(e) for e in events[:-1]]
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    text = "".join(c["choices"][0]["delta"].get("content", "") for c in chunks[1:-1])
    assert text == "Paris is the capital."
    assert chunks[-2]["choices"][0]["finish_reason"] == "stop"
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["total_tokens"] == 24
    assert len({c["id"] for c in chunks}) == 1


async def test_a_worker_failing_mid_stream_ends_the_stream_with_an_error_event(gw: InProcessGateway) -> None:
    gw.workers.chunks = [TextChunk("Par", None, 20, 1), UpstreamError("worker failed serving model chat")]
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "stream": True})
    events = _events(response.text)
    assert "[DONE]" not in events
    assert orjson.loads(events[-1])["error"]["code"] == "worker_error"
    assert gw.metric("shunter_requests_total", route="/v1/chat/completions", model="chat",
                     outcome="failed(worker_error)") == 1
    status = await gw.client.get(f"/v1/requests/{response.headers['x-request-id']}", headers=STANDARD)
    assert status.json()["outcome"] == "failed(worker_error)"


async def test_a_saturated_worker_is_a_503_with_retry_after(gw: InProcessGateway) -> None:
    gw.workers.fail_with = UnavailableError("model chat is saturated; retry shortly", retry_after_s=1)
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json=CHAT)
    assert response.status_code == 503
    assert response.headers["retry-after"] == "1"
    assert response.json()["error"]["type"] == "service_unavailable"
    assert response.headers["x-request-id"].startswith("req_")


async def test_completions_answer_text_and_stream_text_chunks(gw: InProcessGateway) -> None:
    plain = await gw.client.post("/v1/completions", headers=BATCH,
                                 json={"model": "chat", "prompt": "The capital of France is", "max_tokens": 4})
    assert plain.status_code == 200
    assert plain.json()["choices"][0]["text"] == "Paris is the capital."
    assert plain.json()["object"] == "text_completion"
    streamed = await gw.client.post("/v1/completions", headers=BATCH,
                                    json={"model": "chat", "prompt": "The capital", "stream": True})
    events = _events(streamed.text)
    assert events[-1] == "[DONE]"
    assert "".join(orjson.loads(e)["choices"][0]["text"] for e in events[:-1]) == "Paris is the capital."


@pytest.mark.parametrize(("body", "param"), [
    ({**CHAT, "n": 2}, "n"),
    ({**CHAT, "max_tokens": 100_000}, "messages"),
    ({"model": "chat", "prompt": "x", "echo": True}, "echo"),
])
async def test_unsupported_or_oversized_generations_are_400_naming_the_parameter(
        gw: InProcessGateway, body: dict[str, object], param: str) -> None:
    route = "/v1/completions" if "prompt" in body else "/v1/chat/completions"
    response = await gw.client.post(route, headers=STANDARD, json=body)
    assert response.status_code == 400
    assert response.json()["error"]["param"] == param
    assert gw.workers.generations == []


async def test_embeddings_return_one_vector_per_input_in_order(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/embeddings", headers=STANDARD,
                                    json={"model": "embed", "input": ["a cat", "a kitten"]})
    assert response.status_code == 200
    data = response.json()["data"]
    assert [d["index"] for d in data] == [0, 1]
    assert np.allclose(data[1]["embedding"], fake_vector(b"a kitten"))
    counts = gw.gateway.models.text_tokenizers["embed"].counts(["a cat", "a kitten"])
    assert response.json()["usage"]["prompt_tokens"] == sum(counts)
    (call,) = gw.workers.row_calls
    assert call.outputs == ("embedding",) and call.max_batch_rows == 64 and call.instances == 2


async def test_embeddings_in_base64_are_little_endian_float32(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/embeddings", headers=STANDARD,
                                    json={"model": "embed", "input": "a cat", "encoding_format": "base64"})
    vector = np.frombuffer(base64.b64decode(response.json()["data"][0]["embedding"]), dtype="<f4")
    assert np.allclose(vector, fake_vector(b"a cat"))


async def test_repeated_embeddings_come_from_the_tenants_cache(gw: InProcessGateway) -> None:
    seen = []
    for texts in (["x"], ["x"], ["x", "y"]):
        response = await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": texts})
        assert response.status_code == 200
        seen.append({name: response.headers.get(name) for name in
                     ("x-shunter-cache", "x-shunter-pool", "x-shunter-model-version", "x-queue-wait-ms")})
    assert len(gw.workers.row_calls) == 2
    miss, hit, partial = seen
    assert miss["x-shunter-cache"] == "miss" and miss["x-shunter-pool"] not in (None, "cache")
    assert hit == {"x-shunter-cache": "hit", "x-shunter-pool": "cache", "x-shunter-model-version": "1",
                   "x-queue-wait-ms": "0.0"}
    assert partial["x-shunter-cache"] == "partial" and partial["x-shunter-model-version"] == "1"
    # the canary analysis counts every answer of the version, cached ones included
    assert gw.metric("shunter_version_requests_total", model="embed", version="1", outcome="completed") == 3
    other = await gw.client.post("/v1/embeddings", headers=BATCH, json={"model": "embed", "input": ["x"]})
    assert other.status_code == 200 and len(gw.workers.row_calls) == 3  # caches are per tenant


async def test_embedding_errors_name_the_input(gw: InProcessGateway) -> None:
    empty = await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": ["a", ""]})
    assert empty.status_code == 400 and empty.json()["error"]["param"] == "input"
    long = await gw.client.post("/v1/embeddings", headers=STANDARD,
                                json={"model": "embed", "input": ["word " * 400]})
    assert long.status_code == 400 and long.json()["error"]["code"] == "context_length_exceeded"
    dims = await gw.client.post("/v1/embeddings", headers=STANDARD,
                                json={"model": "embed", "input": "a", "dimensions": 3})
    assert dims.status_code == 400 and dims.json()["error"]["param"] == "dimensions"


async def test_the_model_list_names_each_served_model_with_its_kind_and_versions(gw: InProcessGateway) -> None:
    response = await gw.client.get("/v1/models", headers=BATCH)
    models = {m["id"]: m for m in response.json()["data"]}
    assert set(models) == {"chat", "embed", "rerank", "vision", "tabular"}
    assert models["embed"]["kind"] == "embedding" and models["chat"]["versions"] == [1]


async def test_an_ab_split_sticky_to_users_follows_the_x_shunter_user_header(gw: InProcessGateway) -> None:
    gw.workers.extra_versions["embed"] = frozenset({2})
    gw.gateway.routing.replace(1, {"embed": TrafficSplit("embed", {1: 50.0, 2: 50.0}, StickyTo.USER)})
    await gw.workers.refresh()

    async def versions_of(user: str | None) -> set[str]:
        seen = set()
        for i in range(5):  # 45 requests in all: under the tenant's 100 requests/s
            headers = {**PREMIUM, **({"x-shunter-user": user} if user else {})}
            response = await gw.client.post("/v1/embeddings", headers=headers,
                                            json={"model": "embed", "input": [f"{user} {i}"]})
            assert response.status_code == 200
            seen.add(response.headers["x-shunter-model-version"])
        return seen

    per_user = [await versions_of(f"user-{n}") for n in range(8)]
    assert all(len(seen) == 1 for seen in per_user)  # each end user stays on one version
    assert set().union(*per_user) == {"1", "2"}  # and the tenant's users are split
    assert len(await versions_of(None)) == 1  # without the header: sticky to the tenant


async def test_sampling_left_out_gets_the_models_recommended_defaults(gw: InProcessGateway) -> None:
    await gw.client.post("/v1/chat/completions", headers=STANDARD, json=CHAT)
    await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "temperature": 1.0, "top_k": 5})
    defaults, given = (g.request for g in gw.workers.generations)
    assert (defaults.temperature, defaults.top_p, defaults.top_k) == (0.2, 0.9, None)  # generation_config.json
    assert (given.temperature, given.top_p, given.top_k) == (1.0, 0.9, 5)


async def test_response_format_is_sent_to_the_engine_as_a_grammar(gw: InProcessGateway) -> None:
    schema = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    for response_format in ({"type": "json_object"},
                            {"type": "json_schema", "json_schema": {"name": "city", "schema": schema, "strict": True}}):
        response = await gw.client.post("/v1/chat/completions", headers=STANDARD,
                                        json={**CHAT, "response_format": response_format})
        assert response.status_code == 200, response.text
    json_object, json_schema = (g.request.grammar for g in gw.workers.generations)
    assert '"type":"object"' in json_object.replace(" ", "") and '"city"' in json_schema


@pytest.mark.parametrize(("response_format", "param"), [
    ({"type": "json_schema", "json_schema": {"name": "x"}}, "response_format.json_schema"),
    ({"type": "json_schema", "json_schema": {"name": "x", "schema": {"type": "nonsense"}}},
     "response_format.json_schema.schema"),
    ({"type": "yaml"}, "response_format.type"),
])
async def test_a_response_format_that_cannot_be_enforced_is_a_400(gw: InProcessGateway, response_format: object,
                                                                  param: str) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD,
                                    json={**CHAT, "response_format": response_format})
    assert response.status_code == 400 and response.json()["error"]["param"] == param
    assert not gw.workers.generations
