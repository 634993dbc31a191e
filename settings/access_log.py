"""The access-log sink the gateway and control open at their edge: one JSON object per line.

``open_access_log(settings, path)`` returns an ``AccessLog`` writing to ``path`` through a
``RotatingFileHandler`` (rotated at ``max_bytes``, ``backup_count`` old files kept), or None when
access logs are off. The caller decides the fields; this module only guarantees one line per
``write`` with a UTC timestamp first. Callers must never pass a prompt, an output or a key: the
fields are identifiers, codes and numbers.
"""

from __future__ import annotations

import logging
import logging.handlers
import sys
import time
from collections.abc import Mapping
from pathlib import Path

import orjson

from settings.observability import AccessLogSettings


class _JsonLineFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields: Mapping[str, object] = getattr(record, "fields", {})
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
        line = {"ts": f"{stamp}.{int(record.msecs):03d}Z", **fields}
        return orjson.dumps(line, default=str).decode()


class AccessLog:
    """Writes one JSON line per ``write(fields)``."""

    def __init__(self, logger: logging.Logger, path: Path | None) -> None:
        self.logger = logger
        self.path = path  # None: stdout

    def write(self, fields: Mapping[str, object]) -> None:
        self.logger.info("", extra={"fields": fields})

    def close(self) -> None:
        for handler in list(self.logger.handlers):
            handler.close()
            self.logger.removeHandler(handler)


def open_access_log(settings: AccessLogSettings, path: Path) -> AccessLog | None:
    """The access log at ``path`` (its folder made; stdout with ``to: stdout``), or None when
    ``settings.enabled`` is false."""
    if not settings.enabled:
        return None
    to_file = settings.to == "file"
    logger = logging.getLogger(f"shunter.access.{path if to_file else 'stdout'}")
    logger.setLevel(logging.INFO)
    logger.propagate = False  # the access log is its own stream, not the process's log
    for old in list(logger.handlers):  # reopened (tests build many apps): one handler only
        old.close()
        logger.removeHandler(old)
    handler: logging.Handler
    if to_file:
        path.parent.mkdir(parents=True, exist_ok=True)
        handler = logging.handlers.RotatingFileHandler(path, maxBytes=settings.max_bytes,
                                                       backupCount=settings.backup_count, encoding="utf-8")
    else:
        handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(_JsonLineFormatter())
    logger.addHandler(handler)
    return AccessLog(logger, path if to_file else None)
