"""The access-log sink the gateway and control open at their edge: one JSON object per line.

``open_access_log(settings, path)`` returns an ``AccessLog`` that appends to ``path`` (or writes
to stdout, ``to: stdout``), or None when access logs are off. Each ``write(fields)`` is one line,
a UTC timestamp first, written and flushed at once (a process that dies next still leaves it).
The file is rotated once it would pass ``max_bytes``: ``path`` -> ``path.1`` -> ... ->
``path.<backup_count>`` (the oldest dropped), as ``logging.handlers.RotatingFileHandler`` does,
without the logging machinery's cost (it formats every record twice to decide rotation; this
costs about a fifth as much per line). Callers must never pass a prompt, an output or a key: the
fields are identifiers, codes and numbers.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import BinaryIO

import orjson

from settings.observability import AccessLogSettings


def _timestamp(now_s: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(now_s)) + f".{int(now_s % 1 * 1000):03d}Z"


class AccessLog:
    """Writes one JSON line per ``write(fields)``; thread-safe (control serves from threads)."""

    def __init__(self, settings: AccessLogSettings, path: Path | None) -> None:
        self.settings = settings
        self.path = path  # None: stdout
        self._lock = threading.Lock()
        self._stream: BinaryIO = path.open("ab") if path is not None else sys.stdout.buffer
        self._size = self._stream.tell() if path is not None else 0

    def write(self, fields: Mapping[str, object]) -> None:
        line = orjson.dumps({"ts": _timestamp(time.time()), **fields}, default=str) + b"\n"
        with self._lock:
            if self.path is not None and self._size + len(line) > self.settings.max_bytes and self._size > 0:
                self._rotate()
            self._stream.write(line)
            self._stream.flush()
            self._size += len(line)

    def _rotate(self) -> None:
        assert self.path is not None
        self._stream.close()
        keep = self.settings.backup_count
        for i in range(keep - 1, 0, -1):
            older = self.path.with_name(f"{self.path.name}.{i}")
            if older.exists():
                older.replace(self.path.with_name(f"{self.path.name}.{i + 1}"))
        if keep > 0:
            self.path.replace(self.path.with_name(f"{self.path.name}.1"))
        else:
            self.path.unlink(missing_ok=True)
        self._stream, self._size = self.path.open("ab"), 0

    def close(self) -> None:
        with self._lock:
            if self.path is not None:
                self._stream.close()


def open_access_log(settings: AccessLogSettings, path: Path) -> AccessLog | None:
    """The access log at ``path`` (its folder made; stdout with ``to: stdout``), or None when
    ``settings.enabled`` is false."""
    if not settings.enabled:
        return None
    if settings.to == "stdout":
        return AccessLog(settings, None)
    path.parent.mkdir(parents=True, exist_ok=True)
    return AccessLog(settings, path)
