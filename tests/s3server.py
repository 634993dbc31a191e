"""A real S3 endpoint on 127.0.0.1 for tests and benchmarks: moto's server, one process per use.

``with LocalS3Server() as s3:`` starts ``moto_server`` (from this interpreter's ``bin``) on a free
port, waits at most ``startup_timeout_s`` until it answers HTTP, and on exit stops only the
process it started (terminate, bounded wait, then kill). It changes no environment variable:
``s3.credentials_env`` is a dict to apply where wanted, ``s3.client()`` a boto3 client bound to
it. The server's output goes to a temporary log file, removed on exit.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path
from types import TracebackType
from typing import Any

import boto3
from botocore.config import Config

REGION = "us-east-1"


def _free_port(host: str) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


class LocalS3Server:
    """moto_server on ``host``; ``endpoint_url`` is set once entered."""

    def __init__(self, host: str = "127.0.0.1", startup_timeout_s: float = 20.0, stop_timeout_s: float = 10.0) -> None:
        self.host = host
        self.startup_timeout_s = startup_timeout_s
        self.stop_timeout_s = stop_timeout_s
        self.port = 0
        self.log_path: Path | None = None
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint_url(self) -> str:
        if self._process is None:
            raise RuntimeError("LocalS3Server is not running")
        return f"http://{self.host}:{self.port}"

    @property
    def credentials_env(self) -> dict[str, str]:
        """Environment variables that point the standard AWS credential chain at fake credentials."""
        return {
            "AWS_ACCESS_KEY_ID": "testing",
            "AWS_SECRET_ACCESS_KEY": "testing",
            "AWS_SESSION_TOKEN": "testing",
            "AWS_DEFAULT_REGION": REGION,
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server, with the fake credentials and bounded timeouts."""
        env = self.credentials_env
        config = Config(
            connect_timeout=5, read_timeout=60, retries={"max_attempts": 3}, s3={"addressing_style": "path"}
        )
        return boto3.session.Session(
            aws_access_key_id=env["AWS_ACCESS_KEY_ID"],
            aws_secret_access_key=env["AWS_SECRET_ACCESS_KEY"],
            aws_session_token=env["AWS_SESSION_TOKEN"],
            region_name=REGION,
        ).client("s3", endpoint_url=self.endpoint_url, config=config)

    def log_tail(self, limit: int = 4000) -> str:
        if self.log_path is None or not self.log_path.exists():
            return ""
        return self.log_path.read_text(errors="replace")[-limit:]

    def __enter__(self) -> LocalS3Server:
        binary = Path(sys.executable).parent / "moto_server"
        if not binary.exists():
            raise RuntimeError(f"{binary} not found: install moto[server] in this virtualenv")
        self.port = _free_port(self.host)
        log = tempfile.NamedTemporaryFile(prefix="moto-server-", suffix=".log", delete=False)
        self.log_path = Path(log.name)
        with log:
            self._process = subprocess.Popen(
                [str(binary), "-H", self.host, "-p", str(self.port)],
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        try:
            self._wait_ready()
        except BaseException:
            self._stop()
            raise
        return self

    def _wait_ready(self) -> None:
        assert self._process is not None
        deadline = time.monotonic() + self.startup_timeout_s
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"moto_server exited with {self._process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(f"{self.endpoint_url}/moto-api/", timeout=1.0):
                    return
            except (urllib.error.URLError, OSError):
                time.sleep(0.1)
        raise RuntimeError(f"moto_server did not answer within {self.startup_timeout_s} s:\n{self.log_tail()}")

    def _stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=self.stop_timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=self.stop_timeout_s)
        if self.log_path is not None:
            self.log_path.unlink(missing_ok=True)

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self._stop()
