"""The operator CLI (cli/ops.py), its tables and its HTTP client, against a real tiny API.

The admin API here is a small FastAPI app served by uvicorn on 127.0.0.1 in a thread: it records
what it was sent and answers the documented shapes, including the ``{"error": {...}}`` body.
"""

from __future__ import annotations

import io
import json
import socket
import stat
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse
from rich.console import Console
from typer.testing import CliRunner

from cli.admin_client import AdminApiError, AdminClient
from cli.main import app
from cli.ops import TOKEN_ENV, parse_variants
from cli.tables import audit_table, models_table, output_console, status_renderables, version_table

try:
    from control.integrity import load_trusted_keys
except ImportError:  # written alongside; the key tests need it
    load_trusted_keys = None  # type: ignore[assignment]

needs_integrity = pytest.mark.skipif(load_trusted_keys is None, reason="control/integrity.py is not there yet")

ALIAS = {"model": "chat", "weights": {"2": 90.0, "10": 5.0, "3": 5.0}, "sticky": "request", "generation": 7}
FULL_STATUS: dict[str, Any] = {
    "model": "chat",
    "alias": ALIAS,
    "rollout": {"id": 4, "model": "chat", "kind": "canary", "baseline_version": 2,
                "variants": {"3": 10.0, "2": 90.0}, "sticky": "request", "status": "running",
                "thresholds": {"min_requests": 20.0, "max_latency_ratio": 2.0},
                "started_at": 1_700_000_000.0, "updated_at": 1_700_000_060.5, "started_by": "ana@box"},
    "versions": {"2": {"requests": 900, "errors": 3, "error_rate": 0.0033, "p99_latency_s": 0.25},
                 "3": {"requests": 100, "errors": 0, "error_rate": None, "p99_latency_s": None}},
    "last_verdict": {"decision": "continue", "reason": "canary within thresholds", "at": 1_700_000_060.0},
}
EMPTY_STATUS: dict[str, Any] = {"model": "chat", "alias": None, "rollout": None, "versions": {},
                                "last_verdict": None}
ERROR_BODY = {"error": {"message": "no model named ghost", "type": "not_found", "code": "model_not_found"}}


def _render(*renderables: Any) -> str:
    out = io.StringIO()
    console = Console(file=out, width=240, color_system=None)
    for renderable in renderables:
        console.print(renderable)
    return out.getvalue()


# --- --variants -----------------------------------------------------------------------------------

@pytest.mark.parametrize(("text", "expected"), [
    ("2:50,3:50", {2: 50, 3: 50}),
    (" 1:20 , 2:30,3:50 ", {1: 20, 2: 30, 3: 50}),
    ("3:99,2:1", {3: 99, 2: 1}),
])
def test_variants_parse_version_weight_pairs(text: str, expected: dict[int, int]) -> None:
    assert parse_variants(text) == expected


@pytest.mark.parametrize(("text", "says"), [
    ("2:50,3:40", "sum to 90"),
    ("2:50,2:50", "listed twice"),
    ("2:100", "1..99"),
    ("2:0,3:100", "1..99"),
    ("2:60", "at least two"),
    ("2:50;3:50", "VERSION:WEIGHT"),
    ("2:50.5,3:49.5", "VERSION:WEIGHT"),
    ("v2:50,v3:50", "VERSION:WEIGHT"),
    ("2:5_0,3:50", "VERSION:WEIGHT"),
    ("-1:50,3:50", "VERSION:WEIGHT"),
    ("", "VERSION:WEIGHT"),
    ("2:50,", "VERSION:WEIGHT"),
])
def test_variants_refuse_malformed_or_unbalanced_weights(text: str, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        parse_variants(text)


def test_ab_start_reports_bad_variants_as_a_usage_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["ab", "start", "chat", "--variants", "2:50,3:40",
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 2
    assert "sum to 90" in result.output


# --- tables ---------------------------------------------------------------------------------------

def test_status_renders_every_part_of_a_full_status() -> None:
    text = _render(*status_renderables(FULL_STATUS))
    assert "generation 7" in text
    assert text.index("v2 ") < text.index("v3 ") < text.index("v10 ")  # versions sorted as numbers
    assert "v2 90% · v3 10%" in text  # rollout variants
    assert "2023-11-14T22:13:20+00:00" in text  # started_at as ISO
    assert "ana@box" in text
    assert "0.33%" in text and "250.0 ms" in text
    assert "continue" in text and "canary within thresholds" in text


def test_a_split_sticky_to_tenants_shows_which_tenants_sit_on_which_version() -> None:
    tenants = {"acme": 2, "globex": 2, "initech": 2}
    text = _render(*status_renderables({**FULL_STATUS, "tenant_versions": tenants}))
    assert "Tenants per version" in text and "3 of 3" in text and "acme, globex, initech" in text


def test_a_verdict_with_numbers_renders_as_a_table_not_json() -> None:
    side = {"version": 3, "requests": 120, "errors": 9, "error_rate": 0.075, "p99_latency_s": 0.4}
    verdict = {"decision": "rollback", "reason": "error rate 7.5% vs baseline 0.0%",
               "baseline": {**side, "version": 2, "errors": 0, "error_rate": 0.0}, "canary": side,
               "thresholds": {"max_error_rate_delta": 0.05, "min_requests": 20}}
    text = _render(*status_renderables({**FULL_STATUS, "last_verdict": verdict}))
    assert "Verdict window" in text and "7.50%" in text and "400.0 ms" in text
    assert "max_error_rate_delta 0.05" in text and "{" not in text


def test_status_renders_nulls_and_missing_fields() -> None:
    text = _render(*status_renderables(EMPTY_STATUS))
    assert "no alias" in text and "no rollout" in text and "no verdict yet" in text
    sparse = {"model": "chat", "alias": {"weights": None}, "rollout": {"variants": None},
              "versions": {"2": None, "3": {}}, "last_verdict": {"decision": "rollback"}}
    assert "rollback" in _render(*status_renderables(sparse))
    assert "no alias" in _render(*status_renderables({}))


def test_other_tables_render_documented_shapes_and_nulls() -> None:
    version: dict[str, Any] = {
        "model": "embed", "version": 3, "artifact_uri": "file:///store/embed/3", "manifest_digest": "ab" * 32,
        "signer_key_id": "0123456789abcdef", "requirements": {"backend": "python", "kind": "embedding"},
        "state": "verified", "created_at": 1_700_000_000, "created_by": "ana@box"}
    models: list[dict[str, Any]] = [
        {"name": "embed", "kind": "embedding", "versions": [version], "alias": ALIAS},
        {"name": "bare", "kind": "tabular", "versions": [], "alias": None}]
    audit: list[dict[str, Any]] = [
        {"id": 1, "at": 1_700_000_000.0, "actor": "ana@box", "action": "rollout.start", "subject": "chat",
         "reason": "[try] it", "details": {"to": 3}},
        {"id": 2, "at": None, "actor": None, "action": "x", "subject": "", "reason": "", "details": {}}]
    text = _render(version_table(version), models_table(models), audit_table(audit))
    assert "0123456789abcdef" in text and "v3 verified" in text and "v2 90%" in text
    assert '{"to":3}' in text and "[try] it" in text


# --- the HTTP client against a real server ----------------------------------------------------------

class FakeControl:
    """A tiny admin API on 127.0.0.1: records requests, answers the documented shapes."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.registered: dict[str, list[int]] = {}
        self.app = FastAPI()
        self._routes()
        self._socket = socket.socket()
        self._socket.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._socket.getsockname()[1]}"
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", lifespan="off"))
        self._thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self._socket]}, daemon=True)

    def _routes(self) -> None:
        app = self.app

        @app.middleware("http")
        async def record(request: Request, call_next: Any) -> Any:
            body = await request.body()
            self.requests.append({"method": request.method, "path": request.url.path,
                                  "query": dict(request.query_params), "headers": dict(request.headers),
                                  "body": body.decode() if body else None})
            return await call_next(request)

        @app.get("/admin/v1/models")
        def models() -> list[dict[str, Any]]:
            return []

        @app.get("/admin/v1/models/{model}/versions")
        def versions(model: str) -> list[dict[str, Any]]:
            return [{"model": model, "version": v} for v in self.registered.get(model, [])]

        @app.put("/admin/v1/keys/{name}")
        async def trust(name: str, request: Request) -> Any:
            body = await request.json()
            return {"name": name, "key_id": "k" * 16, "changed": "PUBLIC KEY" in body["public_key_pem"]}

        @app.post("/admin/v1/models/{model}/versions", status_code=201)
        async def register(model: str, request: Request) -> Any:
            body = await request.json()
            if body["reason"] == "refuse":
                error = {"message": "signed by key 42, not trusted", "type": "integrity", "code": "untrusted_key"}
                return JSONResponse({"error": error}, status_code=422)
            self.registered.setdefault(model, []).append(body["version"])
            return {"model": model, "version": body["version"], "artifact_uri": body["artifact_uri"],
                    "manifest_digest": "d" * 64, "signer_key_id": "k" * 16, "requirements": body["requirements"],
                    "state": "verified", "created_at": 1_700_000_000.0,
                    "created_by": "ana"}

        @app.get("/admin/v1/rollouts/{model}")
        def rollout_status(model: str) -> Any:
            if model == "chat":
                return FULL_STATUS
            return JSONResponse(ERROR_BODY, status_code=404)

        @app.post("/admin/v1/rollouts/{model}/{action}")
        def rollout_action(model: str, action: str) -> Any:
            return {**EMPTY_STATUS, "model": model}

        @app.get("/admin/v1/audit")
        def audit() -> list[dict[str, Any]]:
            return []

        @app.get("/admin/v1/plain-500")
        def plain() -> Any:
            return JSONResponse("boom", status_code=500)

    def __enter__(self) -> FakeControl:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self.server.started:
            if time.monotonic() > deadline:
                raise RuntimeError("the fake control API did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *_: object) -> None:
        self.server.should_exit = True
        self._thread.join(timeout=10)
        self._socket.close()


@pytest.fixture(scope="module")
def control() -> Iterator[FakeControl]:
    with FakeControl() as fake:
        yield fake


def test_client_raises_the_documented_error_body(control: FakeControl) -> None:
    with AdminClient(control.url, "tok") as client, pytest.raises(AdminApiError) as caught:
        client.rollout_status("ghost")
    assert (caught.value.status, caught.value.code, caught.value.message) == (404, "model_not_found",
                                                                               "no model named ghost")
    assert str(caught.value) == "no model named ghost"


def test_client_sends_the_token_and_json_and_declares_no_actor(control: FakeControl) -> None:
    with AdminClient(control.url + "/", "tok") as client:
        assert client.rollout_status("chat") == FULL_STATUS
        assert client.promote("chat", 3, "looks good")["model"] == "chat"
        assert client.audit("chat", limit=5) == []
    status, action, audit = control.requests[-3:]
    assert status["headers"]["authorization"] == "Bearer tok"
    assert "x-shunter-actor" not in status["headers"]  # control audits the token's name
    assert (action["path"], action["body"]) == ("/admin/v1/rollouts/chat/promote", '{"to":3,"reason":"looks good"}')
    assert audit["query"] == {"subject": "chat", "limit": "5"}


def test_client_refuses_unknown_rollout_actions(control: FakeControl) -> None:
    with AdminClient(control.url, "tok") as client, pytest.raises(ValueError, match="rollback"):
        client.rollout_action("chat", "delete")


def test_client_error_without_the_documented_body_keeps_the_status(control: FakeControl) -> None:
    with AdminClient(control.url, "tok") as client, pytest.raises(AdminApiError) as caught:
        client._call("GET", "/admin/v1/plain-500")
    assert (caught.value.status, caught.value.code) == (500, "http_500")
    assert "boom" in caught.value.message


def test_client_says_when_control_is_not_reachable() -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    url = f"http://127.0.0.1:{port}"
    with AdminClient(url, "tok", timeout_s=2) as client, pytest.raises(AdminApiError) as caught:
        client.list_models()
    assert caught.value.status == 0 and caught.value.code == "unreachable"
    assert f"control API at {url} not reachable" in caught.value.message
    assert "is `shunter up` running?" in caught.value.message


def test_cli_prints_api_errors_in_red_with_their_code_and_exits_1(control: FakeControl, tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["rollout", "status", "ghost", "--control-url", control.url,
                                      "--state-dir", str(tmp_path)])
    assert result.exit_code == 1
    assert "model_not_found, HTTP 404" in result.output and "no model named ghost" in result.output
    assert "Traceback" not in result.output


def test_status_and_audit_print_the_apis_json_with_json(control: FakeControl, tmp_path: Path) -> None:
    where = ["--control-url", control.url, "--state-dir", str(tmp_path)]
    status = CliRunner().invoke(app, ["rollout", "status", "chat", "--json", *where])
    assert status.exit_code == 0 and json.loads(status.output) == FULL_STATUS
    audit = CliRunner().invoke(app, ["audit", "--json", *where])
    assert audit.exit_code == 0 and json.loads(audit.output) == []


def test_a_table_printed_into_a_pipe_is_not_cut_to_80_columns() -> None:
    console = output_console()  # pytest captures stdout: not a terminal
    with console.capture() as captured:
        console.print(audit_table([{"at": 1_700_000_000, "actor": "ana@" + "box" * 20, "action": "rollout.promote",
                                    "subject": "embed", "reason": "healthy canary", "details": {"rollout_id": 3}}]))
    assert "ana@" + "box" * 20 in captured.get() and max(map(len, captured.get().splitlines())) > 80


# --- keys and push --------------------------------------------------------------------------------

def _config_dir(tmp_path: Path) -> Path:
    config = tmp_path / "config"
    config.mkdir()
    (config / "pools.yaml").write_text("pools: [{name: p, gpu_type: a10, models: [embed]}]\n")
    (config / "models.yaml").write_text("models: [{name: embed, kind: embedding, context_tokens: 256}]\n")
    return config


@needs_integrity
def test_keys_generate_writes_a_private_key_0600_and_has_control_trust_the_public_key(
        control: FakeControl, tmp_path: Path) -> None:
    state, config = tmp_path / "state", _config_dir(tmp_path)
    args = ["keys", "generate", "release", "--trust", "--reason", "release signing", "--state-dir", str(state),
            "--config-dir", str(config), "--control-url", control.url]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    private, public = state / "keys" / "release.key", state / "keys" / "release.pub"
    assert stat.S_IMODE(private.stat().st_mode) == 0o600
    sent = control.requests[-1]
    assert (sent["method"], sent["path"]) == ("PUT", "/admin/v1/keys/release")
    assert json.loads(sent["body"]) == {"public_key_pem": public.read_text(), "reason": "release signing"}
    (kid,) = load_trusted_keys(public)
    assert kid in result.output and "takes effect at once" in result.output
    again = CliRunner().invoke(app, args)
    assert again.exit_code == 1 and "already exists" in again.output


@needs_integrity
def test_keys_generate_without_trust_leaves_the_trusted_keys_alone(tmp_path: Path) -> None:
    state = tmp_path / "state"
    result = CliRunner().invoke(app, ["keys", "generate", "dev", "--state-dir", str(state),
                                      "--config-dir", str(_config_dir(tmp_path))])
    assert result.exit_code == 0, result.output
    assert (state / "keys" / "dev.key").exists() and not (state / "keys" / "trusted").exists()
    bad = CliRunner().invoke(app, ["keys", "generate", "../evil", "--state-dir", str(state)])
    assert bad.exit_code == 2


@needs_integrity
def test_models_push_signs_a_copy_uploads_registers_and_a_refused_push_leaves_nothing(
        control: FakeControl, tmp_path: Path) -> None:
    state, config = tmp_path / "state", _config_dir(tmp_path)
    where = ["--state-dir", str(state), "--config-dir", str(config), "--control-url", control.url]
    runner = CliRunner()
    assert runner.invoke(app, ["keys", "generate", "local-build", *where[:4]]).exit_code == 0
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    (artifact / "model.onnx").write_bytes(b"\x00" * 4096)
    (artifact / "tokenizer.json").write_text("{}")
    push = ["models", "push", str(artifact), "--name", "embed", *where]
    result = runner.invoke(app, [*push, "--version", "7", "--reason", "new weights"],
                           env={TOKEN_ENV: "shunter_ana"})
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in artifact.rglob("*")) == ["model.onnx", "tokenizer.json"]  # not written to
    assert (state / "store" / "embed" / "7" / "model.onnx").is_file()
    assert (state / "store" / "embed" / "7" / "shunter-manifest.json").is_file()
    sent = control.requests[-1]
    assert sent["path"] == "/admin/v1/models/embed/versions"
    assert sent["headers"]["authorization"] == "Bearer shunter_ana"
    assert '"kind":"embedding"' in sent["body"] and '"gpu_types":["a10"]' in sent["body"]
    assert '"max_context_tokens":256' in sent["body"] and "embed v7" in result.output

    registrations = len([r for r in control.requests if r["method"] == "POST"])
    again = runner.invoke(app, [*push, "--version", "7"])
    assert again.exit_code == 1 and "version_exists" in again.output and "push v8" in again.output
    assert len([r for r in control.requests if r["method"] == "POST"]) == registrations  # refused before signing

    refused = runner.invoke(app, [*push, "--version", "8", "--reason", "refuse"])
    assert refused.exit_code == 1 and "untrusted_key, HTTP 422" in refused.output
    assert "v8 is still free" in refused.output and "Traceback" not in refused.output
    assert not (state / "store" / "embed" / "8").exists()
    retried = runner.invoke(app, [*push, "--version", "8", "--reason", "trusted now"])
    assert retried.exit_code == 0, retried.output


def test_models_push_of_an_unknown_model_lists_the_configured_ones(control: FakeControl, tmp_path: Path) -> None:
    artifact = tmp_path / "artifact"
    artifact.mkdir()
    result = CliRunner().invoke(app, ["models", "push", str(artifact), "--name", "embedd", "--version", "1",
                                      "--state-dir", str(tmp_path / "state"), "--config-dir",
                                      str(_config_dir(tmp_path)), "--control-url", control.url])
    assert result.exit_code == 2 and "embedd" in result.output and "known models" in result.output
    assert "embed" in result.output.replace("embedd", "")


def test_models_push_of_a_folder_that_does_not_fit_the_kind_names_the_files_and_calls_nothing(
        control: FakeControl, tmp_path: Path) -> None:
    artifact = tmp_path / "artifact"
    (artifact / "1").mkdir(parents=True)
    (artifact / "1" / "model.onnx").write_bytes(b"\x00" * 16)
    (artifact / "README.md").write_text("notes")
    (artifact / ".git").mkdir()  # hidden entries are not part of the artifact
    calls = len(control.requests)
    result = CliRunner().invoke(app, ["models", "push", str(artifact), "--name", "embed", "--version", "1",
                                      "--state-dir", str(tmp_path / "state"), "--config-dir",
                                      str(_config_dir(tmp_path)), "--control-url", control.url])
    assert result.exit_code == 1 and "(bad_layout)" in result.output, result.output
    assert "missing model.onnx, tokenizer.json" in result.output
    assert "unexpected 1/model.onnx, README.md" in result.output
    assert "model.onnx + tokenizer.json" in result.output
    assert len(control.requests) == calls and not (tmp_path / "state" / "store").exists()
