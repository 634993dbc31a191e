"""Each kind's artifact layout: what its backend loads must be there, nothing else; control
refuses (422 ``bad_layout``, audited) a registration whose signed files do not fit."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from control.artifact_layout import LAYOUTS, ArtifactLayoutError, artifact_files, check_layout
from control.control_plane import ControlPlane
from control.integrity import load_private_key, write_signed_manifest
from control.service import create_control_app
from settings.paths import StackPaths
from settings.stack import ModelSpec, PoolSpec, StackConfig, TritonSettings, WorkloadKind

TOKEN = "bootstrap"
CONFIG = StackConfig(
    triton=TritonSettings(),
    pools=(PoolSpec(name="local-cpu", models=("tabular",)),),
    models=(ModelSpec(name="tabular", kind=WorkloadKind.TABULAR),),
)


def _spec(kind: WorkloadKind, **parameters: str) -> ModelSpec:
    return ModelSpec(name="m", kind=kind, parameters=parameters, context_tokens=2048)


@pytest.mark.parametrize(("kind", "files"), [
    (WorkloadKind.LLM, ["model.gguf"]),
    (WorkloadKind.LLM, ["model.gguf", "generation_config.json"]),
    (WorkloadKind.EMBEDDING, ["model.onnx", "tokenizer.json", "shunter-manifest.json", "shunter-manifest.sig"]),
    (WorkloadKind.RERANK, ["model.onnx", "tokenizer.json"]),
    (WorkloadKind.RERANK, ["cross_encoder.onnx", "tokenizer.json"]),
    (WorkloadKind.VISION, ["model.onnx", "labels.txt"]),
    (WorkloadKind.TABULAR, ["model.onnx", "metrics.json"]),
])
def test_a_folder_with_what_the_kind_loads_fits(kind: WorkloadKind, files: list[str]) -> None:
    check_layout(_spec(kind), files)


@pytest.mark.parametrize(("kind", "files", "says"), [
    (WorkloadKind.EMBEDDING, ["model.onnx"], "missing tokenizer.json"),
    (WorkloadKind.RERANK, ["tokenizer.json"], "missing model.onnx or cross_encoder.onnx"),
    (WorkloadKind.VISION, ["model.onnx", "labels.txt", "notes.md"], "unexpected notes.md"),
    (WorkloadKind.TABULAR, ["1/model.onnx"], "missing model.onnx; unexpected 1/model.onnx"),
    (WorkloadKind.LLM, ["weights.gguf"], "missing model.gguf; unexpected weights.gguf"),
])
def test_a_folder_that_does_not_fit_names_the_files_and_the_layout(kind: WorkloadKind, files: list[str],
                                                                   says: str) -> None:
    with pytest.raises(ArtifactLayoutError) as caught:
        check_layout(_spec(kind), files)
    assert says in str(caught.value) and LAYOUTS[kind].describe() in str(caught.value)
    assert caught.value.code == "bad_layout"


def test_an_llm_names_its_weights_file_with_its_model_file_parameter() -> None:
    check_layout(_spec(WorkloadKind.LLM, model_file="weights.gguf"), ["weights.gguf"])


def test_hidden_entries_are_not_part_of_the_artifact(tmp_path: Path) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / ".git" / "HEAD").write_text("ref")
    (tmp_path / ".complete").write_text("1")
    (tmp_path / "model.onnx").write_bytes(b"x")
    assert artifact_files(tmp_path) == ["model.onnx"]


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    paths = StackPaths(config_dir=tmp_path / "config", state_dir=tmp_path / "state", repository=tmp_path / "repo")
    built = paths.artifacts / "tabular"
    built.mkdir(parents=True)
    (built / "model.onnx").write_bytes(b"onnx")
    opened = ControlPlane.open(paths, CONFIG)
    try:
        opened.bootstrap(paths.artifacts)
        yield opened
    finally:
        opened.close()


def test_control_refuses_and_audits_a_registration_that_does_not_fit(plane: ControlPlane, tmp_path: Path) -> None:
    source = tmp_path / "v2"
    source.mkdir()
    (source / "model.json").write_text("{}")
    write_signed_manifest(source, "tabular", 2, load_private_key(plane.settings.local_signing_key))
    uri = plane.store.upload_directory(source, "tabular", 2)
    client = TestClient(create_control_app(CONFIG, None, TOKEN, plane))
    refused = client.post("/admin/v1/models/tabular/versions", headers={"Authorization": f"Bearer {TOKEN}"},
                          json={"version": 2, "artifact_uri": uri, "requirements": {"kind": "tabular"}})
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "bad_layout"
    assert "missing model.onnx; unexpected model.json" in refused.json()["error"]["message"]
    assert plane.registry.version("tabular", 2) is None
    entry = plane.registry.audit_log(subject="tabular", action_prefix="version.refused")[0]
    assert entry.details["code"] == "bad_layout" and entry.actor == "admin"
    shutil.rmtree(source)
