"""The artifact store: immutable model versions, on a local directory or on S3.

Contract. A version of a model is a directory tree stored once under ``<model>/<version>/``
and never overwritten: ``upload_directory`` raises ``ArtifactExistsError`` if the version
already holds anything. ``download(uri, dest)`` copies every file under a URI that this store
produced into ``dest`` (created if missing; same-named files replaced) and raises
``ArtifactNotFoundError`` if there is none. ``progress``, when given, is called with the number of
bytes just transferred, one call at a time; the calls of one transfer sum to its total bytes (on
S3 a retried part first reports a negative amount, undoing what it had reported).
Stores move bytes and do not check them: ``control.integrity.verify_directory`` does, after a
download. Every failure surfaces as an ``ArtifactStoreError`` (or a ``ValueError`` for a malformed
name or URL) with a message fit for an operator, never a botocore error.

Errors (a branch of the control plane's tree, ``control/errors.py``)::

    ArtifactStoreError        the store could not do what was asked (unreachable, no bucket, denied)
    ├── ArtifactExistsError   the version is already stored; versions are immutable
    └── ArtifactNotFoundError nothing is stored under the URI or version

On S3 the manifest and signature files are uploaded last, so a version whose upload broke off
has no signature and fails verification; the uploader also deletes what it wrote on failure.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path, PurePosixPath
from typing import Any, Protocol
from urllib.parse import parse_qs, unquote, urlsplit

import boto3
from boto3.exceptions import S3TransferFailedError, S3UploadFailedError
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, EndpointConnectionError, NoCredentialsError

from control.errors import ControlError
from control.integrity import MANIFEST_NAME, SIGNATURE_NAME

Progress = Callable[[int], None]

MULTIPART_BYTES = 8 << 20
COPY_CHUNK_BYTES = 1 << 20
_MODEL_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$")
_BUCKET_NAME = re.compile(r"^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$")
_LAST = (MANIFEST_NAME, SIGNATURE_NAME)


class ArtifactStoreError(ControlError):
    """The store could not complete the operation; the message says why."""


class ArtifactExistsError(ArtifactStoreError):
    """The version is already stored; versions are immutable."""


class ArtifactNotFoundError(ArtifactStoreError):
    """Nothing is stored under the URI or version."""


class ArtifactStore(Protocol):
    """Where artifact versions live; see the module docstring for the contract."""

    def uri_for(self, model: str, version: int) -> str: ...

    def upload_directory(self, local_dir: Path, model: str, version: int, progress: Progress | None = None) -> str: ...

    def download(self, uri: str, dest_dir: Path, progress: Progress | None = None) -> Path: ...

    def exists(self, model: str, version: int) -> bool: ...

    def list_versions(self, model: str) -> list[int]: ...

    def delete(self, model: str, version: int) -> None: ...


def _check_name(model: str, version: int) -> None:
    if not isinstance(model, str) or not _MODEL_NAME.match(model):
        raise ValueError(f"invalid model name {model!r}: use letters, digits, '.', '_' or '-'")
    if not isinstance(version, int) or isinstance(version, bool) or version < 0:
        raise ValueError(f"invalid version {version!r}: must be a non-negative integer")


def _local_files(local_dir: Path) -> list[tuple[str, Path]]:
    """(relative POSIX path, path) of every file below ``local_dir``, data files first (sorted),
    then the manifest, then the signature. Symlinks and special files are refused."""
    if not local_dir.is_dir():
        raise ArtifactStoreError(f"{local_dir} is not a directory")
    found: list[tuple[str, Path]] = []
    for root, dirnames, filenames in os.walk(local_dir, followlinks=False):
        for name in dirnames + filenames:
            path = Path(root) / name
            mode = path.lstat().st_mode
            if stat.S_ISLNK(mode) or (name in filenames and not stat.S_ISREG(mode)):
                raise ArtifactStoreError(f"{path} is not a regular file or directory; refusing to upload it")
            if name in filenames:
                found.append((path.relative_to(local_dir).as_posix(), path))
    if not found:
        raise ArtifactStoreError(f"{local_dir} holds no files")
    return sorted(found, key=lambda item: (_LAST.index(item[0]) + 1 if item[0] in _LAST else 0, item[0]))


def _safe_target(dest_dir: Path, rel: str) -> Path:
    """``dest_dir / rel``, refusing a relative path that would leave ``dest_dir``."""
    parts = PurePosixPath(rel).parts
    if not rel or rel.startswith("/") or "\\" in rel or any(p in ("", ".", "..") for p in parts):
        raise ArtifactStoreError(f"refusing to download {rel!r}: the path leaves the destination directory")
    return dest_dir.joinpath(*parts)


def _copy(src: Path, dst: Path, progress: Progress | None) -> None:
    with src.open("rb") as reader, dst.open("wb") as writer:
        while chunk := reader.read(COPY_CHUNK_BYTES):
            writer.write(chunk)
            if progress is not None:
                progress(len(chunk))


class LocalArtifactStore:
    """Versions under ``root/<model>/<version>/``; URIs are ``file:///abs/path``. An upload is
    copied into a hidden temporary sibling, then renamed into place (atomic on one filesystem)."""

    def __init__(self, root: Path | str) -> None:
        self.root = Path(root).expanduser().resolve()

    def _path(self, model: str, version: int) -> Path:
        _check_name(model, version)
        return self.root / model / str(version)

    def uri_for(self, model: str, version: int) -> str:
        return self._path(model, version).as_uri()

    def upload_directory(self, local_dir: Path, model: str, version: int, progress: Progress | None = None) -> str:
        target = self._path(model, version)
        files = _local_files(Path(local_dir))
        if target.exists():
            raise ArtifactExistsError(f"{model} v{version} is already stored at {self.uri_for(model, version)}")
        target.parent.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".upload-{version}-", dir=target.parent))
        try:
            for rel, src in files:
                dst = staging / rel
                dst.parent.mkdir(parents=True, exist_ok=True)
                _copy(src, dst, progress)
            try:
                os.rename(staging, target)
            except OSError as exc:
                raise ArtifactExistsError(f"{model} v{version} was stored by someone else meanwhile") from exc
        except BaseException:
            shutil.rmtree(staging, ignore_errors=True)
            raise
        return self.uri_for(model, version)

    def _path_of_uri(self, uri: str) -> Path:
        parts = urlsplit(uri)
        if parts.scheme != "file" or parts.netloc not in ("", "localhost"):
            raise ArtifactStoreError(f"{uri!r} is not a file:// URI of this store ({self.root.as_uri()})")
        path = Path(unquote(parts.path)).resolve()
        if not path.is_relative_to(self.root):
            raise ArtifactStoreError(f"{uri!r} is outside this store ({self.root.as_uri()})")
        return path

    def download(self, uri: str, dest_dir: Path, progress: Progress | None = None) -> Path:
        source = self._path_of_uri(uri)
        if not source.is_dir() or not any(p.is_file() for p in source.rglob("*")):
            raise ArtifactNotFoundError(f"nothing is stored at {uri}")
        dest = Path(dest_dir)
        dest.mkdir(parents=True, exist_ok=True)
        for rel, src in _local_files(source):
            dst = _safe_target(dest, rel)
            dst.parent.mkdir(parents=True, exist_ok=True)
            _copy(src, dst, progress)
        return dest

    def exists(self, model: str, version: int) -> bool:
        return self._path(model, version).is_dir()

    def delete(self, model: str, version: int) -> None:
        """Remove a stored version (a refused push, a pruned version); nothing if absent."""
        target = self._path(model, version)
        if target.is_dir():
            doomed = Path(tempfile.mkdtemp(prefix=f".delete-{version}-", dir=target.parent))
            os.rename(target, doomed / "version")
            shutil.rmtree(doomed, ignore_errors=True)

    def list_versions(self, model: str) -> list[int]:
        _check_name(model, 0)
        base = self.root / model
        if not base.is_dir():
            return []
        return sorted(int(p.name) for p in base.iterdir() if p.is_dir() and p.name.isdigit())


def _describe_client_error(exc: ClientError, bucket: str, action: str) -> str:
    error = exc.response.get("Error", {})
    code, message = str(error.get("Code", "")), str(error.get("Message", ""))
    if code == "NoSuchBucket":
        return f"S3 bucket {bucket!r} does not exist (create it first, e.g. with ensure_bucket)"
    if code in ("AccessDenied", "403", "InvalidAccessKeyId", "SignatureDoesNotMatch", "ExpiredToken"):
        return f"S3 denied {action} on bucket {bucket!r} ({code}): check the AWS credentials and policy"
    return f"S3 error while trying to {action} in bucket {bucket!r}: {code or 'unknown'} {message}".rstrip()


def _as_int(text: str) -> int | None:
    return int(text) if text.isdigit() else None


class S3ArtifactStore:
    """Versions under ``s3://bucket/prefix/<model>/<version>/``. The client comes from the standard
    AWS credential chain (environment, shared credentials file, instance role) unless given.
    Files of ``multipart_bytes`` or more are uploaded in parts of that size, ``max_concurrency``
    at a time. The bucket is created only by ``ensure_bucket()``."""

    def __init__(
        self,
        bucket: str,
        prefix: str = "",
        endpoint_url: str | None = None,
        region: str = "us-east-1",
        client: Any | None = None,
        multipart_bytes: int = MULTIPART_BYTES,
        max_concurrency: int = 4,
    ) -> None:
        if not _BUCKET_NAME.match(bucket):
            raise ValueError(f"invalid S3 bucket name {bucket!r}")
        self.bucket = bucket
        self.prefix = prefix.strip("/")
        self.endpoint_url = endpoint_url
        self.region = region
        self.client = client if client is not None else self._make_client()
        self.transfer_config = TransferConfig(
            multipart_threshold=multipart_bytes, multipart_chunksize=multipart_bytes, max_concurrency=max_concurrency
        )

    def _make_client(self) -> Any:
        config = Config(
            connect_timeout=5,
            read_timeout=60,
            retries={"max_attempts": 3, "mode": "standard"},
            s3={"addressing_style": "path"} if self.endpoint_url else None,
        )
        return boto3.session.Session().client(
            "s3", endpoint_url=self.endpoint_url, region_name=self.region, config=config
        )

    @contextmanager
    def _translate(self, action: str) -> Iterator[None]:
        """Re-raise botocore and boto3 errors as ``ArtifactStoreError`` with an operator's message."""
        where = self.endpoint_url or "AWS S3"
        try:
            yield
        except ClientError as exc:
            raise ArtifactStoreError(_describe_client_error(exc, self.bucket, action)) from exc
        except EndpointConnectionError as exc:
            raise ArtifactStoreError(f"cannot reach S3 at {where} to {action}: is the endpoint up?") from exc
        except NoCredentialsError as exc:
            raise ArtifactStoreError(f"no AWS credentials found to {action} (set AWS_ACCESS_KEY_ID/...)") from exc
        except (S3UploadFailedError, S3TransferFailedError) as exc:
            raise ArtifactStoreError(f"S3 transfer failed while trying to {action} at {where}: {exc}") from exc
        except BotoCoreError as exc:
            raise ArtifactStoreError(f"S3 at {where} failed to {action}: {exc}") from exc

    def _key_prefix(self, model: str, version: int | None = None) -> str:
        """``prefix/model/`` or ``prefix/model/version/`` (always ending in a slash)."""
        parts = [p for p in (self.prefix, model, None if version is None else str(version)) if p]
        return "/".join(parts) + "/"

    def uri_for(self, model: str, version: int) -> str:
        _check_name(model, version)
        return f"s3://{self.bucket}/{self._key_prefix(model, version).rstrip('/')}"

    def ensure_bucket(self) -> None:
        """Create the bucket if it does not exist yet."""
        with self._translate("create the bucket"):
            try:
                self.client.head_bucket(Bucket=self.bucket)
                return
            except ClientError as exc:
                if str(exc.response.get("Error", {}).get("Code")) not in ("404", "NoSuchBucket", "NotFound"):
                    raise
            kwargs: dict[str, Any] = {"Bucket": self.bucket}
            if self.region != "us-east-1":
                kwargs["CreateBucketConfiguration"] = {"LocationConstraint": self.region}
            self.client.create_bucket(**kwargs)

    def _any_object(self, key_prefix: str) -> bool:
        response = self.client.list_objects_v2(Bucket=self.bucket, Prefix=key_prefix, MaxKeys=1)
        return bool(response.get("KeyCount", 0))

    def exists(self, model: str, version: int) -> bool:
        _check_name(model, version)
        with self._translate(f"look up {model} v{version}"):
            return self._any_object(self._key_prefix(model, version))

    def list_versions(self, model: str) -> list[int]:
        _check_name(model, 0)
        key_prefix = self._key_prefix(model)
        versions: set[int] = set()
        with self._translate(f"list the versions of {model}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=key_prefix, Delimiter="/"):
                for common in page.get("CommonPrefixes", []):
                    number = _as_int(common["Prefix"][len(key_prefix):].rstrip("/"))
                    if number is not None:
                        versions.add(number)
        return sorted(versions)

    def upload_directory(self, local_dir: Path, model: str, version: int, progress: Progress | None = None) -> str:
        key_prefix = self._key_prefix(model, version)
        uri = self.uri_for(model, version)
        files = _local_files(Path(local_dir))
        with self._translate(f"upload {model} v{version}"):
            if self._any_object(key_prefix):
                raise ArtifactExistsError(f"{model} v{version} is already stored at {uri}")
        callback = _serialized(progress)
        written: list[str] = []
        try:
            with self._translate(f"upload {model} v{version}"):
                for rel, path in files:
                    key = key_prefix + rel
                    self.client.upload_file(
                        str(path), self.bucket, key, Callback=callback, Config=self.transfer_config
                    )
                    written.append(key)
        except BaseException:
            self._delete_quietly(written)
            raise
        return uri

    def delete(self, model: str, version: int) -> None:
        """Remove every object of a stored version (a refused push, a pruned version)."""
        _check_name(model, version)
        key_prefix = self._key_prefix(model, version)
        with self._translate(f"delete {model} v{version}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=key_prefix):
                batch = [{"Key": item["Key"]} for item in page.get("Contents", [])]
                if batch:
                    self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})

    def _delete_quietly(self, keys: list[str]) -> None:
        """Best effort: remove the objects of a failed upload, so a retry is not refused."""
        for start in range(0, len(keys), 1000):
            batch = [{"Key": key} for key in keys[start:start + 1000]]
            try:
                self.client.delete_objects(Bucket=self.bucket, Delete={"Objects": batch, "Quiet": True})
            except (ClientError, BotoCoreError):
                return

    def _key_prefix_of_uri(self, uri: str) -> str:
        parts = urlsplit(uri)
        if parts.scheme != "s3" or parts.netloc != self.bucket:
            raise ArtifactStoreError(f"{uri!r} is not in this store's bucket (s3://{self.bucket})")
        key = parts.path.strip("/")
        if not key:
            raise ArtifactStoreError(f"{uri!r} names no artifact, only the bucket")
        return key + "/"

    def download(self, uri: str, dest_dir: Path, progress: Progress | None = None) -> Path:
        key_prefix = self._key_prefix_of_uri(uri)
        dest = Path(dest_dir)
        callback = _serialized(progress)
        count = 0
        with self._translate(f"download {uri}"):
            paginator = self.client.get_paginator("list_objects_v2")
            for page in paginator.paginate(Bucket=self.bucket, Prefix=key_prefix):
                for item in page.get("Contents", []):
                    if item["Key"].endswith("/"):
                        continue
                    target = _safe_target(dest, item["Key"][len(key_prefix):])
                    target.parent.mkdir(parents=True, exist_ok=True)
                    self.client.download_file(
                        self.bucket, item["Key"], str(target), Callback=callback, Config=self.transfer_config
                    )
                    count += 1
        if count == 0:
            raise ArtifactNotFoundError(f"nothing is stored at {uri}")
        return dest


def _serialized(progress: Progress | None) -> Progress | None:
    """``progress`` behind a lock: boto3 calls back from its transfer threads."""
    if progress is None:
        return None
    lock = threading.Lock()

    def call(amount: int) -> None:
        with lock:
            progress(amount)

    return call


def _open_s3(url: str) -> S3ArtifactStore:
    parts = urlsplit(url)
    if not parts.netloc:
        raise ValueError(f"artifact store URL {url!r} names no bucket: use s3://bucket/prefix")
    if parts.fragment:
        raise ValueError(f"artifact store URL {url!r} must not have a fragment")
    query = parse_qs(parts.query, keep_blank_values=True, strict_parsing=False)
    unknown = sorted(set(query) - {"endpoint", "region"})
    if unknown:
        raise ValueError(f"artifact store URL {url!r} has unknown parameters {unknown}: use endpoint=, region=")
    if any(len(values) != 1 for values in query.values()):
        raise ValueError(f"artifact store URL {url!r} repeats a parameter")
    endpoint = query.get("endpoint", [None])[0]
    if endpoint is not None:
        endpoint_parts = urlsplit(endpoint)
        if endpoint_parts.scheme not in ("http", "https") or not endpoint_parts.hostname:
            raise ValueError(f"S3 endpoint {endpoint!r} must be an http:// or https:// URL with a host")
    region = query.get("region", ["us-east-1"])[0] or "us-east-1"
    return S3ArtifactStore(parts.netloc, prefix=unquote(parts.path), endpoint_url=endpoint, region=region)


def open_store(url: str) -> ArtifactStore:
    """The store a URL names: ``file:///abs/path`` or a plain path -> ``LocalArtifactStore``;
    ``s3://bucket/prefix?endpoint=http://host:port&region=name`` -> ``S3ArtifactStore``.
    Raises ``ValueError`` for anything else."""
    if not isinstance(url, str) or not url.strip():
        raise ValueError("artifact store URL is empty: use file:///path, a path, or s3://bucket/prefix")
    if "://" not in url and not url.startswith("file:"):
        return LocalArtifactStore(Path(url))
    scheme = urlsplit(url).scheme
    if scheme == "file":
        parts = urlsplit(url)
        if parts.netloc not in ("", "localhost") or parts.query or parts.fragment or not parts.path.startswith("/"):
            raise ValueError(f"artifact store URL {url!r} must be file:///absolute/path")
        return LocalArtifactStore(Path(unquote(parts.path)))
    if scheme == "s3":
        return _open_s3(url)
    raise ValueError(f"unsupported artifact store URL {url!r}: use file:///path, a plain path, or s3://bucket/prefix")
