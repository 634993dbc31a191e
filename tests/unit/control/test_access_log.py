"""Control's access log: one JSON line per admin request, a crash included, never the admin token."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import orjson
from fastapi.testclient import TestClient

from control.service import create_control_app
from settings.access_log import open_access_log
from settings.observability import AccessLogSettings
from settings.stack import StackConfig, TritonSettings

TOKEN = "admin-token-never-logged"


def test_every_admin_request_leaves_a_line_and_an_exception_names_where_it_was_raised(tmp_path: Path) -> None:
    access_log = open_access_log(AccessLogSettings(), tmp_path / "control.access.jsonl")
    config = StackConfig(triton=TritonSettings(), pools=(), models=())
    app = create_control_app(config, cast(Any, None), TOKEN, access_log=access_log)

    @app.get("/boom/{name}")
    def boom(name: str) -> None:
        raise KeyError(name)

    client = TestClient(app, raise_server_exceptions=False)
    assert client.get("/admin/v1/models", headers={"Authorization": f"Bearer {TOKEN}x"}).status_code == 401
    assert client.get("/boom/secret-name").status_code == 500
    assert client.get("/metrics").status_code == 200  # a scrape: no line
    text = (tmp_path / "control.access.jsonl").read_text()
    refused, crashed = (orjson.loads(line) for line in text.splitlines())
    assert refused["status"] == 401 and refused["method"] == "GET" and refused["component"] == "control"
    assert crashed["status"] == 500 and crashed["route"] == "/boom/{name}" and "KeyError" in crashed["error"]
    assert TOKEN not in text and "secret-name" not in text


def test_access_logs_can_be_turned_off(tmp_path: Path) -> None:
    assert open_access_log(AccessLogSettings(enabled=False), tmp_path / "x.jsonl") is None
    assert not (tmp_path / "x.jsonl").exists()


def test_the_log_rotates_past_max_bytes_keeping_backup_count_files(tmp_path: Path) -> None:
    path = tmp_path / "gateway.access.jsonl"
    access_log = open_access_log(AccessLogSettings(max_bytes=64 * 1024, backup_count=2), path)
    assert access_log is not None
    for i in range(3000):  # ~60 bytes a line: about three files' worth
        access_log.write({"request_id": f"req_{i:06d}"})
    access_log.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["gateway.access.jsonl", "gateway.access.jsonl.1", "gateway.access.jsonl.2"]
    assert all(p.stat().st_size <= 64 * 1024 for p in tmp_path.iterdir())
    newest = [orjson.loads(line)["request_id"] for line in path.read_text().splitlines()]
    assert newest[-1] == "req_002999"
