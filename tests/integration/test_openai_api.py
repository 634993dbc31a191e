"""The OpenAI-compatible API through the official openai SDK, unchanged, against the real stack."""

from __future__ import annotations

import base64
import json
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import openai
import pytest
from openai.types.chat import ChatCompletionUserMessageParam

from tests.integration.conftest import KEYS, RunningStack

pytestmark = pytest.mark.integration
QUESTION: list[ChatCompletionUserMessageParam] = [
    {"role": "user", "content": "What is the capital of France? Answer in one word."}]


@pytest.fixture(scope="module")
def sdk(stack: RunningStack) -> openai.OpenAI:
    return openai.OpenAI(base_url=f"{stack.url}/v1", api_key=KEYS["standard"], max_retries=0, timeout=120)


def test_models_list_shows_every_served_model(sdk: openai.OpenAI) -> None:
    assert {m.id for m in sdk.models.list()} == {"chat", "embed", "rerank", "vision", "tabular"}


def test_chat_completion_answers_with_usage(sdk: openai.OpenAI) -> None:
    response = sdk.chat.completions.create(model="chat", messages=QUESTION, temperature=0, max_tokens=20)
    choice = response.choices[0]
    assert "Paris" in (choice.message.content or "")
    assert choice.finish_reason == "stop"
    assert response.usage is not None and response.usage.prompt_tokens > 10
    assert response.usage.total_tokens == response.usage.prompt_tokens + response.usage.completion_tokens


def test_the_readme_example_at_the_sdks_default_sampling_answers_sensibly(sdk: openai.OpenAI) -> None:
    # No temperature given: the model's generation config (0.2, top_p 0.9) applies, not 1.0.
    answers = [sdk.chat.completions.create(model="chat", messages=QUESTION, max_tokens=20, seed=seed)
               for seed in range(3)]
    assert all("Paris" in (a.choices[0].message.content or "") for a in answers)


CITY_SCHEMA = {"type": "object", "additionalProperties": False, "required": ["city", "population"],
               "properties": {"city": {"type": "string", "maxLength": 24},
                              "population": {"type": "integer", "minimum": 0, "maximum": 99_999_999}}}
JSON_QUESTION: list[ChatCompletionUserMessageParam] = [
    {"role": "user", "content": "What is the capital of France and its population? Answer in JSON."}]


def test_json_schema_answers_sampled_at_temperature_one_all_parse_and_validate(stack: RunningStack) -> None:
    sdk = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=KEYS["premium"], max_retries=0, timeout=600)

    def ask(seed: int) -> str:
        response = sdk.chat.completions.create(
            model="chat", messages=JSON_QUESTION, temperature=1.0, seed=seed, max_tokens=100,
            response_format={"type": "json_schema",
                             "json_schema": {"name": "city", "schema": CITY_SCHEMA, "strict": True}})
        assert response.choices[0].finish_reason == "stop"
        return response.choices[0].message.content or ""

    with ThreadPoolExecutor(max_workers=8) as pool:
        answers = [json.loads(text) for text in pool.map(ask, range(24))]  # CI time: 24 samples
    assert all(set(a) == {"city", "population"} and isinstance(a["population"], int) for a in answers)
    assert len({json.dumps(a) for a in answers}) > 5  # sampled, not one greedy answer


def test_json_mode_answers_are_json_objects(stack: RunningStack) -> None:
    sdk = openai.OpenAI(base_url=f"{stack.url}/v1", api_key=KEYS["premium"], max_retries=0, timeout=600)

    def ask(seed: int) -> openai.types.chat.ChatCompletion:
        return sdk.chat.completions.create(model="chat", messages=JSON_QUESTION, temperature=1.0, seed=seed,
                                           max_tokens=300, response_format={"type": "json_object"})

    with ThreadPoolExecutor(max_workers=5) as pool:
        responses = list(pool.map(ask, range(10)))
    finished = [r.choices[0].message.content or "" for r in responses if r.choices[0].finish_reason == "stop"]
    assert len(finished) >= 8  # the rest ran into max_tokens inside the object (as OpenAI's JSON mode can)
    assert all(isinstance(json.loads(text), dict) for text in finished)


def test_an_unsupported_parameter_is_refused_by_name(sdk: openai.OpenAI) -> None:
    with pytest.raises(openai.BadRequestError) as refused:
        sdk.chat.completions.create(model="chat", messages=QUESTION, presence_penalty=0.5)
    assert refused.value.body["param"] == "presence_penalty"  # type: ignore[index]


def test_streamed_chat_yields_tokens_then_finish_and_usage(sdk: openai.OpenAI) -> None:
    chunks = list(sdk.chat.completions.create(model="chat", messages=QUESTION, temperature=0, max_tokens=20,
                                              stream=True, stream_options={"include_usage": True}))
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert "Paris" in text
    assert sum(1 for c in chunks if c.choices and c.choices[0].delta.content) >= 3  # streamed, not one blob
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens > 0


def test_raw_sse_stream_ends_with_done(stack: RunningStack) -> None:
    body = {"model": "chat", "messages": QUESTION, "max_tokens": 8, "stream": True, "temperature": 0}
    with stack.client() as client, client.stream("POST", "/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        data = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert data[-1] == "data: [DONE]"


def test_completions_streamed_and_not_agree(sdk: openai.OpenAI) -> None:
    whole = sdk.completions.create(model="chat", prompt="The capital of France is", max_tokens=6, temperature=0)
    streamed = "".join(c.choices[0].text for c in sdk.completions.create(
        model="chat", prompt="The capital of France is", max_tokens=6, temperature=0, stream=True))
    assert "Paris" in whole.choices[0].text
    assert streamed == whole.choices[0].text
    assert whole.usage is not None and whole.usage.completion_tokens == 6


def test_embeddings_are_real_sentence_embeddings(sdk: openai.OpenAI) -> None:
    texts = ["A cat sleeps on the sofa.", "A kitten naps on the couch.", "Stock markets fell sharply."]
    response = sdk.embeddings.create(model="embed", input=texts)
    vectors = np.array([d.embedding for d in sorted(response.data, key=lambda d: d.index)])
    assert vectors.shape == (3, 384)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-4)
    assert vectors[0] @ vectors[1] > 0.6 > vectors[0] @ vectors[2]
    assert response.usage.prompt_tokens > 0


def test_embeddings_larger_than_a_triton_batch_keep_their_order(sdk: openai.OpenAI) -> None:
    texts = [f"sentence number {i}" for i in range(150)]
    many = sdk.embeddings.create(model="embed", input=texts)
    one = sdk.embeddings.create(model="embed", input=texts[137])
    assert np.allclose(many.data[137].embedding, one.data[0].embedding, atol=1e-4)


def test_base64_embeddings_decode_to_the_same_vectors(sdk: openai.OpenAI) -> None:
    floats = sdk.embeddings.create(model="embed", input="hello")
    encoded = sdk.embeddings.create(model="embed", input="hello", encoding_format="base64")
    decoded = np.frombuffer(base64.b64decode(encoded.data[0].embedding), dtype="<f4")  # type: ignore[arg-type]
    assert np.allclose(floats.data[0].embedding, decoded, atol=1e-6)


def test_concurrent_embeddings_of_many_tenants_each_get_their_own_vectors(stack: RunningStack) -> None:
    import asyncio

    import httpx

    texts = [f"tenant sentence {i}: {'alpha beta gamma delta'[: 4 + i % 17]}" for i in range(48)]
    keys = list(KEYS.values())

    async def embed_all() -> list[list[float]]:
        async with httpx.AsyncClient(base_url=stack.url, timeout=120) as client:
            async def one(i: int) -> list[float]:
                response = await client.post("/v1/embeddings", json={"model": "embed", "input": texts[i]},
                                             headers={"Authorization": f"Bearer {keys[i % 3]}"})
                assert response.status_code == 200, response.text
                return response.json()["data"][0]["embedding"]  # type: ignore[no-any-return]

            return list(await asyncio.gather(*(one(i) for i in range(len(texts)))))

    together = np.array(asyncio.run(embed_all()))
    solo = np.array([d.embedding for d in openai.OpenAI(base_url=f"{stack.url}/v1", api_key=keys[0]).embeddings.create(
        model="embed", input=texts).data])
    assert np.allclose(together, solo, atol=1e-4)
