"""Hostile input in-process: the key before the body, bodies bounded while read, values checked
before any work, every error with a request id and one log line, bounded metric labels."""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import httpx
import pytest
import yaml
from fastapi import FastAPI

from gateway.app import create_app
from settings.paths import StackPaths
from settings.stack import StackConfig
from settings.workers import WorkerAddress
from tests.unit.gateway.conftest import STANDARD, InProcessGateway
from tests.unit.gateway.fake_transport import FakeTransport

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "hi"}]}
MIB = 1 << 20


async def _chunks(total_bytes: int, sent: list[int], chunk_bytes: int = 64 * 1024) -> AsyncIterator[bytes]:
    """A body streamed in chunks (no Content-Length); ``sent`` counts what the server pulled."""
    while sent[0] < total_bytes:
        sent[0] += chunk_bytes
        yield b" " * chunk_bytes


def _assert_error(response: httpx.Response, status: int, code: str, param: str | None = None) -> None:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["code"] == code, error
    if param is not None:
        assert error["param"] == param, error
    assert response.headers["x-request-id"].startswith("req_")


async def test_a_body_over_the_limit_is_413_before_it_is_read_whole(gw: InProcessGateway) -> None:
    sent = [0]
    response = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "content-type": "application/json"},
                                    content=_chunks(50 * MIB, sent))
    _assert_error(response, 413, "payload_too_large", "body")
    assert sent[0] <= 4 * MIB + 128 * 1024  # stopped at the 4 MiB limit, not at 50 MB
    declared = await gw.client.post("/v1/embeddings", headers={**STANDARD, "content-length": str(50 * MIB)},
                                    content=b"{}")
    _assert_error(declared, 413, "payload_too_large")
    assert gw.workers.generations == [] and gw.workers.row_calls == []


async def test_an_unauthenticated_body_is_401_before_a_byte_is_read(gw: InProcessGateway) -> None:
    sent = [0]
    response = await gw.client.post("/v1/embeddings", headers={"content-type": "application/json"},
                                    content=_chunks(50 * MIB, sent))
    _assert_error(response, 401, "invalid_api_key")
    assert sent[0] <= 64 * 1024
    wrong = await gw.client.post("/v2/models/tabular/infer", headers={"Authorization": "Bearer nope"},
                                 content=b"x" * 1000)
    assert wrong.status_code == 401 and wrong.json()["code"] == "invalid_api_key"  # the KServe body


async def test_kserve_inference_keeps_its_64_mib_limit(gw: InProcessGateway) -> None:
    big = b"\0" * (5 * MIB)
    headers = {**STANDARD, "inference-header-content-length": "2"}
    response = await gw.client.post("/v2/models/tabular/infer", headers=headers, content=b"{}" + big)
    assert response.status_code == 400 and response.json()["code"] != "payload_too_large"  # read, then refused
    over = await gw.client.post("/v2/models/tabular/infer", headers={**STANDARD, "content-length": str(65 * MIB)},
                                content=b"{}")
    assert over.status_code == 413 and over.json()["code"] == "payload_too_large"


@pytest.mark.parametrize("junk", [b"{}," * 5000, b"1," * 120_000])
async def test_json_with_too_many_values_is_refused_before_parsing(gw: InProcessGateway, junk: bytes) -> None:
    body = b'{"model": "chat", "messages": [{"role": "user", "content": "hi"}], "junk": [' + junk + b"1]}"
    response = await gw.client.post("/v1/chat/completions", headers={**STANDARD, "content-type": "application/json"},
                                    content=body)
    _assert_error(response, 400, "too_many_values", "body")


@pytest.mark.parametrize(("path", "body", "param"), [
    ("/v1/chat/completions", {**CHAT, "messages": [{"role": "user", "content": "a\ud800b"}]}, "messages.0.content"),
    ("/v1/chat/completions", {**CHAT, "seed": 2**70}, "seed"),
    ("/v1/chat/completions", {**CHAT, "seed": -1}, "seed"),
    ("/v1/chat/completions", {**CHAT, "top_p": 5e-324}, "top_p"),
    ("/v1/chat/completions", {**CHAT, "top_p": 1.5}, "top_p"),
    ("/v1/chat/completions", {**CHAT, "top_k": 2**40}, "top_k"),
    ("/v1/chat/completions", {**CHAT, "temperature": 3}, "temperature"),
    ("/v1/chat/completions", {**CHAT, "max_tokens": 2**40}, "max_tokens"),
    ("/v1/chat/completions", {**CHAT, "model": "\udc00"}, "model"),
    ("/v1/completions", {"model": "chat", "prompt": "\ud800"}, "prompt"),
    ("/v1/embeddings", {"model": "embed", "input": ["fine", "\ud83d"]}, "input"),
    ("/v1/rerank", {"model": "rerank", "query": "q", "documents": ["\ud800"]}, "documents"),
])
async def test_values_out_of_range_are_400_naming_the_parameter(gw: InProcessGateway, path: str,
                                                                body: dict[str, object], param: str) -> None:
    response = await gw.client.post(path, headers={**STANDARD, "content-type": "application/json"},
                                    content=json.dumps(body).encode())  # ASCII: "\ud800" stays an escape
    _assert_error(response, 400, "invalid_value")
    assert response.json()["error"]["param"].startswith(param)
    assert gw.workers.generations == [] and gw.workers.row_calls == []


async def test_an_unhandled_exception_is_a_500_with_a_request_id_and_one_log_line(
        gw: InProcessGateway, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    def explode(*_: object) -> list[int]:
        raise RuntimeError("the secret prompt text")

    monkeypatch.setattr(gw.gateway.models.text_tokenizers["embed"], "counts", explode)
    with caplog.at_level(logging.WARNING, logger="gateway.requests"):
        response = await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": "x"})
    _assert_error(response, 500, "internal_error")
    request_id = response.headers["x-request-id"]
    lines = [r.getMessage() for r in caplog.records if request_id in r.getMessage()]
    assert len(lines) == 1 and "RuntimeError" in lines[0] and "500" in lines[0]
    assert "secret" not in lines[0]
    assert gw.metric("shunter_requests_total", route="/v1/embeddings", model="embed",
                     outcome="failed(internal_error)") == 1


async def test_every_4xx_logs_one_line_with_its_request_id(gw: InProcessGateway,
                                                          caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="gateway.requests"):
        response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "model": "nope"})
    assert response.status_code == 404
    lines = [r.getMessage() for r in caplog.records if response.headers["x-request-id"] in r.getMessage()]
    assert len(lines) == 1 and "404" in lines[0] and "model_not_found" in lines[0]


async def test_a_405_names_the_allowed_methods(gw: InProcessGateway) -> None:
    response = await gw.client.get("/v1/chat/completions", headers=STANDARD)
    assert response.status_code == 405 and response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "http_405" and response.headers["x-request-id"]


async def test_kserve_health_answers_json(gw: InProcessGateway) -> None:
    assert (await gw.client.get("/v2/health/live")).json() == {"live": True}
    assert (await gw.client.get("/v2/health/ready")).json() == {"ready": True}
    ready = await gw.client.get("/v2/models/tabular/ready", headers=STANDARD)
    assert ready.status_code == 200 and ready.json() == {"name": "tabular", "ready": True}


async def test_invented_model_names_share_one_unknown_label(gw: InProcessGateway) -> None:
    for i in range(2000):
        response = await gw.client.post("/v1/embeddings", headers=STANDARD, json={"model": f"m{i}", "input": "x"})
        assert response.status_code == 404
    series = [s for family in gw.gateway.metrics.registry.collect() for s in family.samples
              if s.name.startswith("shunter_request")]
    models = {s.labels.get("model") for s in series}
    assert models <= {"unknown", "embed", "chat", "rerank", "vision", "tabular", ""}
    assert gw.metric("shunter_requests_total", route="/v1/embeddings", model="unknown",
                     outcome="rejected(model_not_found)") == 2000
    assert len(series) < 100


async def test_the_openapi_document_lists_each_status_with_the_error_schema(gw: InProcessGateway) -> None:
    document = (await gw.client.get("/openapi.json")).json()
    chat = document["paths"]["/v1/chat/completions"]["post"]["responses"]
    assert {"400", "401", "403", "404", "409", "413", "422", "429", "500", "502", "503", "504"} <= set(chat)
    assert chat["422"]["content"]["application/json"]["schema"]["$ref"].endswith("/ErrorBody")
    assert "Retry-After" in chat["429"]["headers"]
    infer = document["paths"]["/v2/models/{name}/infer"]["post"]["responses"]
    assert infer["413"]["content"]["application/json"]["schema"]["$ref"].endswith("/KServeErrorBody")


def _app_with(tmp_path: Path, settings: dict[str, object]) -> Callable[[], tuple[FastAPI, list[FakeTransport]]]:
    shipped = StackPaths()
    config_dir = tmp_path / "config"
    shutil.copytree(shipped.config_dir, config_dir)
    gateway_yaml = yaml.safe_load((config_dir / "gateway.yaml").read_text())
    (config_dir / "gateway.yaml").write_text(yaml.safe_dump({**gateway_yaml, **settings}))
    fakes: list[FakeTransport] = []

    def transport(config: StackConfig, addresses: Sequence[WorkerAddress], poll_interval_s: float) -> FakeTransport:
        fakes.append(FakeTransport(config, addresses=list(addresses)))
        return fakes[-1]

    def make() -> tuple[FastAPI, list[FakeTransport]]:
        return create_app(StackPaths(config_dir=config_dir, state_dir=shipped.state_dir), transport=transport), fakes

    return make


async def _client(app: FastAPI, base_url: str = "http://gateway") -> httpx.AsyncClient:
    return httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url=base_url, timeout=10.0)


async def test_input_and_token_limits_are_configurable(tmp_path: Path, artifacts_dir: Path) -> None:
    app, fakes = _app_with(tmp_path, {"max_inputs_per_request": 3, "max_request_tokens": 50,
                                      "max_body_bytes": 64 * 1024})()
    async with app.router.lifespan_context(app), await _client(app) as client:
        many = await client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": ["a"] * 4})
        _assert_error(many, 400, "too_many_inputs", "input")
        long = await client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": ["word " * 60]})
        _assert_error(long, 400, "too_many_tokens", "input")
        docs = await client.post("/v1/rerank", headers=STANDARD,
                                 json={"model": "rerank", "query": "q", "documents": ["a", "b", "c", "d"]})
        _assert_error(docs, 400, "too_many_inputs", "documents")
        big = await client.post("/v1/embeddings", headers=STANDARD, json={"model": "embed", "input": "x" * 70_000})
        _assert_error(big, 413, "payload_too_large")
        assert fakes[0].row_calls == []


async def test_metrics_can_need_a_token_and_an_address_of_their_own(tmp_path: Path, artifacts_dir: Path) -> None:
    (tmp_path / "metrics.token").write_text("s3cret\n")
    app, _ = _app_with(tmp_path, {"metrics_token_file": str(tmp_path / "metrics.token"),
                                  "metrics_listen": "127.0.0.1:9090"})()
    async with app.router.lifespan_context(app), await _client(app, "http://gateway:9090") as metrics, \
            await _client(app, "http://gateway:8080") as api:
        assert (await metrics.get("/metrics")).status_code == 401
        page = await metrics.get("/metrics", headers={"Authorization": "Bearer s3cret"})
        assert page.status_code == 200 and "shunter_requests" in page.text
        assert (await metrics.get("/healthz")).status_code == 200
        assert (await metrics.post("/v1/embeddings", headers=STANDARD, json={})).status_code == 404
        assert (await api.get("/metrics", headers={"Authorization": "Bearer s3cret"})).status_code == 404
        assert (await api.get("/healthz")).status_code == 200
