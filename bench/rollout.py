"""Rollout timings on the real stack: how soon a canary serves, how soon a rollback is complete.

``python -m bench rollout --rounds 5 --json /tmp/rollout.json`` starts a local stack serving
``embed`` (one Triton worker, the gateway following control's routing, artifacts in a moto S3
server on 127.0.0.1), keeps a closed loop of embedding requests running (4 clients) and, each
round, pushes a new version (sign, upload, register through the admin API), then measures:
- ``canary_first_served_s``: from sending ``rollout start --canary 10`` until the first response
  served by the new version (load + warm + routing + the first request that hashes to it);
- ``rollback_to_baseline_s``: from sending ``rollback`` until the last request *started* that a
  gateway still sent to the candidate (every request started later went to the baseline);
- ``routing_applied_s`` (control's own reading: until the gateway ran the new weights) and
  ``rollback_total_s`` (weights, drain and unload, until the command returned).
It prints medians as a Markdown table and writes every round to ``--json``.
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import yaml

from bench.harness import write_config
from control.artifacts import S3ArtifactStore
from control.integrity import load_private_key, write_signed_manifest
from control.stack import Listen, LocalStack
from settings.paths import StackPaths, admin_token
from tests.s3server import LocalS3Server

app = typer.Typer(add_completion=False)
BASE_PORT = 29100
GATEWAY_PORT = 29180
CONTROL_PORT = 29181
BUCKET = "bench-rollout"
KEY = "demo-premium-key"


@dataclass
class Traffic:
    """A closed loop of embedding requests recording (start, end, serving version)."""

    url: str
    clients: int = 4
    served: list[tuple[float, float, str]] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _threads: list[threading.Thread] = field(default_factory=list)

    def _loop(self, index: int) -> None:
        with httpx.Client(base_url=self.url, timeout=30.0, headers={"Authorization": f"Bearer {KEY}"}) as client:
            n = 0
            while not self._stop.is_set():
                started = time.monotonic()
                response = client.post("/v1/embeddings", json={"model": "embed", "input": [f"probe {index} {n}"]})
                n += 1
                if response.status_code == 200:
                    self.served.append((started, time.monotonic(), response.headers["x-shunter-model-version"]))

    def __enter__(self) -> Traffic:
        self._threads = [threading.Thread(target=self._loop, args=(i,), daemon=True) for i in range(self.clients)]
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)


def _paths(root: Path, endpoint: str) -> StackPaths:
    shipped = StackPaths()
    config_dir, state_dir = root / "config", root / "state"
    write_config(shipped.config_dir, config_dir, BASE_PORT)
    pools = yaml.safe_load((config_dir / "pools.yaml").read_text())
    pools["pools"][0]["models"] = ["embed"]
    (config_dir / "pools.yaml").write_text(yaml.safe_dump(pools))
    (config_dir / "control.yaml").write_text(json.dumps({"artifact_store": f"s3://{BUCKET}/m?endpoint={endpoint}"}))
    state_dir.mkdir(parents=True)
    (state_dir / "artifacts").symlink_to(shipped.artifacts)
    return StackPaths(config_dir=config_dir, state_dir=state_dir, repository=root / "repository")


def _push(admin: httpx.Client, store: S3ArtifactStore, paths: StackPaths, version: int, scratch: Path) -> None:
    staged = scratch / f"embed-{version}"
    shutil.copytree(StackPaths().artifacts / "embed", staged, ignore=shutil.ignore_patterns(".*"))
    write_signed_manifest(staged, "embed", version, load_private_key(paths.state_dir / "keys" / "local-build.key"))
    uri = store.upload_directory(staged, "embed", version)
    response = admin.post("/admin/v1/models/embed/versions", json={
        "version": version, "artifact_uri": uri, "requirements": {"kind": "embedding"}})
    response.raise_for_status()


def _round(admin: httpx.Client, traffic: Traffic, candidate: int) -> dict[str, float]:
    sent = time.monotonic()
    started = admin.post("/admin/v1/rollouts/embed/canary", json={"to": candidate, "percent": 10})
    started.raise_for_status()
    deadline = time.monotonic() + 30
    while not any(v == str(candidate) and end >= sent for _, end, v in traffic.served) and time.monotonic() < deadline:
        time.sleep(0.01)
    first = min(end for _, end, v in traffic.served if v == str(candidate) and end >= sent)
    time.sleep(2.0)
    rollback_sent = time.monotonic()
    rolled = admin.post("/admin/v1/rollouts/embed/rollback", json={"reason": "bench"})
    rolled.raise_for_status()
    returned = time.monotonic()
    last_candidate = max((s for s, _, v in traffic.served if v == str(candidate) and s >= rollback_sent),
                         default=rollback_sent)
    timings = rolled.json()["timings"]
    return {"canary_first_served_s": first - sent, "canary_start_returned_s": started.elapsed.total_seconds(),
            "rollback_to_baseline_s": last_candidate - rollback_sent,
            "routing_applied_s": float(timings["routing_applied_s"]), "rollback_total_s": returned - rollback_sent}


@app.command()
def main(rounds: Annotated[int, typer.Option(min=1, max=20)] = 5,
         json_out: Annotated[Path | None, typer.Option("--json")] = None) -> None:
    with LocalS3Server() as s3, tempfile.TemporaryDirectory(prefix="bench-rollout-") as tmp:
        os.environ.update(s3.credentials_env)
        S3ArtifactStore(BUCKET, "m", endpoint_url=s3.endpoint_url).ensure_bucket()
        paths = _paths(Path(tmp), s3.endpoint_url)
        stack = LocalStack(paths, Listen(gateway_port=GATEWAY_PORT, control_port=CONTROL_PORT))
        stack.start(log=lambda _: None)
        results: list[dict[str, float]] = []
        try:
            store = S3ArtifactStore(BUCKET, "m", endpoint_url=s3.endpoint_url)
            with httpx.Client(base_url=stack.control_url, timeout=600.0, headers={
                    "Authorization": f"Bearer {admin_token(paths)}"}) as admin, \
                    Traffic(stack.gateway_url) as traffic:
                for index in range(rounds):
                    _push(admin, store, paths, 2 + index, Path(tmp))
                    results.append(_round(admin, traffic, 2 + index))
                    print(json.dumps(results[-1]))
        finally:
            stack.stop()
    _report(results, json_out)


def _report(results: list[dict[str, float]], json_out: Path | None) -> None:
    medians: dict[str, Any] = {k: statistics.median(r[k] for r in results) for k in results[0]}
    print(f"| measure (embed, 1 CPU worker, 4 closed-loop clients) | median of {len(results)} |\n|---|---|")
    for name, value in medians.items():
        print(f"| {name} | {value * 1000:.0f} ms |")
    if json_out is not None:
        json_out.write_text(json.dumps({"rounds": results, "medians": medians}, indent=2))

