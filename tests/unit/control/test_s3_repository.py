"""The S3 model repository: Triton's URL form, and the order in which a render is published."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from control.s3_repository import S3Repository, triton_uri


@pytest.mark.parametrize(("uri", "expected"), [
    ("s3://models/repository?endpoint=http://minio:9000", "s3://http://minio:9000/models/repository"),
    ("s3://models/repository?region=eu-west-1", "s3://models/repository"),
    ("s3://models", "s3://models"),
])
def test_the_repository_in_tritons_form(uri: str, expected: str) -> None:
    assert triton_uri(uri) == expected
    assert S3Repository(uri, client=object()).triton_uri == expected


def test_a_repository_that_is_not_s3_is_refused() -> None:
    with pytest.raises(ValueError, match="s3://"):
        triton_uri("file:///var/repo")


class RecordingClient:
    """Records uploads and deletes; lists what was there before."""

    def __init__(self, existing: list[str]) -> None:
        self.existing = existing
        self.calls: list[tuple[str, str]] = []

    def get_paginator(self, name: str) -> Any:
        client = self

        class Paginator:
            def paginate(self, **kwargs: Any) -> list[dict[str, Any]]:
                return [{"Contents": [{"Key": k} for k in client.existing if k.startswith(kwargs["Prefix"])]}]
        return Paginator()

    def upload_file(self, path: str, bucket: str, key: str, **_: Any) -> None:
        self.calls.append(("put", key))

    def delete_object(self, Bucket: str, Key: str) -> None:  # boto3's argument names
        self.calls.append(("delete", Key))


def test_new_files_then_the_version_policy_then_retired_files(tmp_path: Path) -> None:
    model = tmp_path / "tabular"
    (model / "2").mkdir(parents=True)
    (model / "2" / "model.onnx").write_bytes(b"onnx")
    (model / "config.pbtxt").write_text("version_policy: { specific: { versions: [2] } }")
    client = RecordingClient(["repo/a10/tabular/config.pbtxt", "repo/a10/tabular/1/model.onnx",
                              "repo/h100/tabular/1/model.onnx"])
    S3Repository("s3://models/repo", client=client).publish(tmp_path, ["tabular"], under="a10")
    assert client.calls == [("put", "repo/a10/tabular/2/model.onnx"), ("put", "repo/a10/tabular/config.pbtxt"),
                            ("delete", "repo/a10/tabular/1/model.onnx")], "another pool's repository is left alone"
