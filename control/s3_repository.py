"""The Triton model repository on S3: control renders locally, then publishes what it rendered.

``S3Repository(uri)`` takes the repository's place as ``s3://bucket/prefix?endpoint=http://...``
(the artifact store's URL form). ``publish(local_dir, names, under)`` makes ``prefix/under/<name>/``
on S3 hold exactly what ``local_dir/<name>/`` holds, for each Triton model name (``under``: the
pool, whose pods read ``prefix/<pool>``, rendered for its GPU type), in an order that a Triton
pod reading the repository at any moment tolerates (S3 has no rename):

1. every file except ``config.pbtxt`` is uploaded (a new version's directory appears, but the
   old version policy does not list it yet);
2. ``config.pbtxt`` is uploaded (the version policy now names exactly the rendered versions);
3. the objects that the render no longer has are deleted (a retired version's files).

``triton_uri`` is the same place in the form ``tritonserver --model-repository`` takes:
``s3://bucket/prefix`` on AWS, ``s3://http://host:port/bucket/prefix`` with an endpoint.
Errors are ``ArtifactStoreError`` with the store's messages.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from urllib.parse import parse_qs, unquote, urlsplit

from control.artifacts import ArtifactStoreError, S3ArtifactStore, open_store

CONFIG_FILE = "config.pbtxt"


def triton_uri(uri: str) -> str:
    """``s3://bucket/prefix?endpoint=http://host:port`` in the form ``--model-repository`` takes."""
    parts = urlsplit(uri)
    if parts.scheme != "s3" or not parts.netloc:
        raise ValueError(f"model repository {uri!r} must be an s3://bucket/prefix URL")
    path = "/".join(p for p in (parts.netloc, unquote(parts.path).strip("/")) if p)
    endpoint = parse_qs(parts.query).get("endpoint", [None])[0]
    if endpoint is None:
        return f"s3://{path}"
    where = urlsplit(endpoint)
    return f"s3://{where.scheme}://{where.netloc}/{path}"


class S3Repository:
    def __init__(self, uri: str, client: object | None = None) -> None:
        store = open_store(uri)
        if not isinstance(store, S3ArtifactStore):
            raise ValueError(f"model repository {uri!r} must be an s3:// URL")
        if client is not None:
            store.client = client
        self._store = store

    @property
    def bucket(self) -> str:
        return self._store.bucket

    @property
    def prefix(self) -> str:
        return self._store.prefix

    @property
    def triton_uri(self) -> str:
        """The repository as ``tritonserver --model-repository`` names it."""
        path = "/".join(p for p in (self.bucket, self.prefix) if p)
        endpoint = self._store.endpoint_url
        if endpoint is None:
            return f"s3://{path}"
        parts = urlsplit(endpoint)
        return f"s3://{parts.scheme}://{parts.netloc}/{path}"

    def ensure_bucket(self) -> None:
        self._store.ensure_bucket()

    def _key(self, under: str, name: str, relative: str = "") -> str:
        return "/".join(p for p in (self.prefix, under, name, relative) if p)

    def keys(self, name: str, under: str = "") -> set[str]:
        """Every object key under ``prefix/under/<name>/``."""
        found: set[str] = set()
        with self._store._translate(f"list the repository's {name}"):
            paginator = self._store.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=self._key(under, name) + "/"):
                found.update(item["Key"] for item in page.get("Contents", []))
        return found

    def publish(self, local_dir: Path, names: Sequence[str], under: str = "") -> None:
        """Mirror ``local_dir/<name>/`` to ``prefix/under/<name>/`` for each of ``names``; see the
        module docstring."""
        for name in names:
            source = local_dir / name
            if not (source / CONFIG_FILE).is_file():
                raise ArtifactStoreError(f"{source} has no {CONFIG_FILE}: nothing rendered to publish")
            files = sorted(p for p in source.rglob("*") if p.is_file())
            relative = {p: p.relative_to(source).as_posix() for p in files}
            stale = self.keys(name, under) - {self._key(under, name, r) for r in relative.values()}
            ordered = [p for p in files if relative[p] != CONFIG_FILE] + [source / CONFIG_FILE]
            with self._store._translate(f"publish {name} to the model repository"):
                for path in ordered:
                    self._store.client.upload_file(str(path), self.bucket, self._key(under, name, relative[path]),
                                                   Config=self._store.transfer_config)
                for key in sorted(stale):
                    self._store.client.delete_object(Bucket=self.bucket, Key=key)

    def remove(self, name: str, under: str = "") -> None:
        """Delete ``prefix/under/<name>/`` (config first, so no reader sees versions without a policy)."""
        keys = sorted(self.keys(name, under), key=lambda k: (not k.endswith("/" + CONFIG_FILE), k))
        with self._store._translate(f"remove {name} from the model repository"):
            for key in keys:
                self._store.client.delete_object(Bucket=self.bucket, Key=key)
