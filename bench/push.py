"""Artifact push and pull throughput: manifest+sign, upload, download and verify of a ~64 MiB version.

``python -m bench push --runs 5 --json /tmp/push.json`` builds an artifact directory of seeded
random bytes (40 + 12 + 8 + 4 MiB files and a small config), then for each store (the local moto
S3 server of ``tests.s3server`` and, as a baseline, a local directory store) runs ``--runs``
rounds, each to a new version: ``write_signed_manifest``, ``upload_directory``, ``download`` into
a fresh directory and ``verify_directory``. It prints the median of each step as a Markdown table
(MB = 10^6 bytes) and writes every timing to ``--json``. moto is a Python server on the same host,
so S3 figures measure the client path plus moto's CPU cost, not a network.
"""

from __future__ import annotations

import json
import os
import platform
import random
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Annotated

import typer
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from control.artifacts import MULTIPART_BYTES, ArtifactStore, LocalArtifactStore, S3ArtifactStore
from control.integrity import TrustedKeys, verify_directory, write_signed_manifest
from tests.s3server import LocalS3Server

app = typer.Typer(add_completion=False)
MIB = 1 << 20
FILE_MIB = {"weights-0.bin": 40, "weights-1.bin": 12, "tokenizer.bin": 8, "embeddings.bin": 4}
MODEL = "bench-push"
STEPS = ("sign_s", "push_s", "download_s", "verify_s")


def make_artifact(root: Path, seed: int = 0) -> int:
    """Write the benchmark's files under ``root``; return their total bytes."""
    rng = random.Random(seed)
    root.mkdir(parents=True)
    for name, mib in FILE_MIB.items():
        (root / name).write_bytes(rng.randbytes(mib * MIB))
    (root / "config.json").write_text(json.dumps({"model": MODEL, "seed": seed}))
    return sum(p.stat().st_size for p in root.iterdir())


def _round(
    store: ArtifactStore, artifact: Path, dest: Path, version: int, key: Ed25519PrivateKey, trusted: TrustedKeys
) -> dict[str, float]:
    """Seconds of each step of pushing and pulling ``version`` once."""
    stamps = [time.perf_counter()]
    write_signed_manifest(artifact, MODEL, version, key)
    stamps.append(time.perf_counter())
    uri = store.upload_directory(artifact, MODEL, version)
    stamps.append(time.perf_counter())
    store.download(uri, dest)
    stamps.append(time.perf_counter())
    verify_directory(dest, trusted, MODEL, version)
    stamps.append(time.perf_counter())
    return {step: stamps[i + 1] - stamps[i] for i, step in enumerate(STEPS)}


def run_store(store: ArtifactStore, artifact: Path, scratch: Path, runs: int) -> dict[str, list[float]]:
    """Seconds of each step for ``runs`` rounds, each round pushing a new version."""
    key = Ed25519PrivateKey.generate()
    trusted = TrustedKeys([key.public_key()])
    timings: dict[str, list[float]] = {step: [] for step in STEPS}
    for version in range(1, runs + 1):
        dest = scratch / f"download-{version}"
        for step, seconds in _round(store, artifact, dest, version, key, trusted).items():
            timings[step].append(seconds)
        shutil.rmtree(dest)
    return timings


def summarize(timings: dict[str, list[float]], total_bytes: int) -> dict[str, float]:
    """Median seconds per step and the matching throughputs in MB/s (10^6 bytes)."""
    median = {step: statistics.median(values) for step, values in timings.items()}
    pull_s = statistics.median(d + v for d, v in zip(timings["download_s"], timings["verify_s"], strict=True))
    mb = total_bytes / 1e6
    return {
        **median,
        "download_verify_s": pull_s,
        "sign_mb_s": mb / median["sign_s"],
        "push_mb_s": mb / median["push_s"],
        "download_mb_s": mb / median["download_s"],
        "verify_mb_s": mb / median["verify_s"],
        "download_verify_mb_s": mb / pull_s,
    }


def markdown(results: dict[str, dict[str, float]], total_bytes: int, runs: int) -> str:
    header = (
        f"| store ({total_bytes / MIB:.0f} MiB, median of {runs}) | manifest+sign | push | download | verify "
        "| download+verify |\n|---|---|---|---|---|---|"
    )
    rows = []
    for store, s in results.items():
        cells = [
            f"{s['sign_s']:.2f} s ({s['sign_mb_s']:.0f} MB/s)",
            f"{s['push_s']:.2f} s ({s['push_mb_s']:.0f} MB/s)",
            f"{s['download_s']:.2f} s ({s['download_mb_s']:.0f} MB/s)",
            f"{s['verify_s']:.2f} s ({s['verify_mb_s']:.0f} MB/s)",
            f"{s['download_verify_s']:.2f} s ({s['download_verify_mb_s']:.0f} MB/s)",
        ]
        rows.append(f"| {store} | " + " | ".join(cells) + " |")
    return "\n".join([header, *rows])


@app.command()
def main(
    runs: Annotated[int, typer.Option(min=1)] = 5,
    json_path: Annotated[Path | None, typer.Option("--json", help="write every timing here")] = None,
    stores: Annotated[str, typer.Option(help="comma-separated: s3, local")] = "s3,local",
    seed: Annotated[int, typer.Option()] = 0,
) -> None:
    chosen = [name.strip() for name in stores.split(",") if name.strip()]
    unknown = sorted(set(chosen) - {"s3", "local"})
    if unknown:
        raise typer.BadParameter(f"unknown stores {unknown}: use s3, local")
    results: dict[str, dict[str, float]] = {}
    raw: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-push-") as tmp:
        artifact = Path(tmp) / "artifact"
        total_bytes = make_artifact(artifact, seed)
        if "s3" in chosen:
            with LocalS3Server() as s3:
                store = S3ArtifactStore("bench-push", endpoint_url=s3.endpoint_url, client=s3.client())
                store.ensure_bucket()
                raw["s3 (moto_server, 127.0.0.1)"] = run_store(store, artifact, Path(tmp), runs)
        if "local" in chosen:
            local = LocalArtifactStore(Path(tmp) / "local-store")
            raw["local directory"] = run_store(local, artifact, Path(tmp), runs)
    results = {name: summarize(timings, total_bytes) for name, timings in raw.items()}
    print(markdown(results, total_bytes, runs))
    if json_path is not None:
        report = {
            "artifact_bytes": total_bytes,
            "files_mib": FILE_MIB,
            "runs": runs,
            "multipart_bytes": MULTIPART_BYTES,
            "host": {"cpus": os.cpu_count(), "python": platform.python_version(), "machine": platform.machine()},
            "timings_s": raw,
            "summary": results,
        }
        json_path.write_text(json.dumps(report, indent=2) + "\n")
        print(f"wrote {json_path}")

