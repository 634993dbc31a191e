"""A user's own trace file, read and checked: Shunter's format, the Azure LLM inference trace, Mooncake's.

``load_items(trace)`` is what ``shunter sim --trace`` reads: a shipped trace's name or a file.
``read_trace(path, fmt=None)`` returns ``TraceRecord``s in arrival order, times from the first
arrival. The format is detected from the file (the CSV header, or the first JSON object's keys)
unless ``fmt`` names it:

* ``shunter``: JSONL, one object per line, or CSV with a header. Required ``arrival_s`` (seconds),
  ``prompt_tokens``, ``output_tokens``; optional ``tenant``, ``tier``, ``model`` and
  ``prefix_blocks`` (a list of block hashes; in CSV, space-separated) with ``block_tokens`` (the
  tokens one hash covers, default 16, the chat engine's KV block);
* ``azure``: the Azure LLM inference trace 2023 CSV (``TIMESTAMP``, ``ContextTokens``,
  ``GeneratedTokens``);
* ``mooncake``: Mooncake's JSONL (``timestamp`` in ms, ``input_length``, ``output_length``,
  ``hash_ids`` of 512-token blocks).

A file that matches no format, a row with a missing, non-numeric or negative field, or a file
with no rows raises ``TraceFormatError`` naming the file, the line and the expected columns, so
nothing is half-simulated. Hand-written: the formats are three small, fixed layouts, and the
checks (which line, which column) are the point.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

from simulator.workloads import AZURE, DEFAULT_TRACES_DIR, TraceItem, _seconds, load_azure

TraceFormat = Literal["shunter", "azure", "mooncake"]
FORMATS: tuple[TraceFormat, ...] = ("shunter", "azure", "mooncake")
DEFAULT_BLOCK_TOKENS = 16
MOONCAKE_BLOCK_TOKENS = 512
EXPECTED = {
    "shunter": "arrival_s, prompt_tokens, output_tokens [, tenant, tier, model, prefix_blocks, block_tokens]",
    "azure": "TIMESTAMP, ContextTokens, GeneratedTokens",
    "mooncake": "timestamp (ms), input_length, output_length [, hash_ids]",
}


class TraceFormatError(ValueError):
    """The trace file cannot be read as a trace; the message names the file, the line, the columns."""


@dataclass(frozen=True)
class TraceRecord:
    """One request of a user's trace."""

    arrival_s: float
    prompt_tokens: int
    output_tokens: int
    tenant: str | None = None
    tier: str | None = None
    model: str | None = None
    prefix_blocks: tuple[int, ...] = ()
    block_tokens: int = DEFAULT_BLOCK_TOKENS

    @property
    def item(self) -> TraceItem:
        """The simulator's workload item (output at least one token)."""
        return TraceItem(self.arrival_s, self.prompt_tokens, max(1, self.output_tokens))


def read_trace(path: Path, fmt: TraceFormat | None = None) -> list[TraceRecord]:
    """The records of ``path``; see the module docstring."""
    if not path.is_file():
        raise TraceFormatError(f"{path}: no such file")
    chosen = fmt or detect_format(path)
    records = list(_rows(path, chosen))
    if not records:
        raise TraceFormatError(f"{path}: no requests (a {chosen} trace needs rows of {EXPECTED[chosen]})")
    start = min(r.arrival_s for r in records)
    return sorted((replace(r, arrival_s=r.arrival_s - start) for r in records), key=lambda r: r.arrival_s)


def detect_format(path: Path) -> TraceFormat:
    """The format of ``path`` from its first non-empty line."""
    first = next((line.strip() for line in _lines(path) if line.strip()), "")
    if first.startswith("{"):
        try:
            keys = set(json.loads(first))
        except (ValueError, TypeError) as exc:
            raise TraceFormatError(f"{path}:1: not a JSON object ({exc})") from exc
        if {"timestamp", "input_length", "output_length"} <= keys:
            return "mooncake"
        if {"arrival_s", "prompt_tokens", "output_tokens"} <= keys:
            return "shunter"
    else:
        header = {c.strip() for c in next(csv.reader([first]), [])}
        if {"TIMESTAMP", "ContextTokens", "GeneratedTokens"} <= header:
            return "azure"
        if {"arrival_s", "prompt_tokens", "output_tokens"} <= header:
            return "shunter"
    expected = "; ".join(f"{name}: {columns}" for name, columns in EXPECTED.items())
    raise TraceFormatError(f"{path}: matches no trace format (expected columns, by format: {expected})")


def _lines(path: Path) -> Iterator[str]:
    with path.open(encoding="utf-8", errors="replace", newline="") as handle:
        yield from handle


def _rows(path: Path, fmt: TraceFormat) -> Iterator[TraceRecord]:
    is_json = next((line.strip() for line in _lines(path) if line.strip()), "").startswith("{")
    for number, row in (_json_rows(path) if is_json else _csv_rows(path)):
        try:
            yield _record(row, fmt)
        except (KeyError, ValueError, TypeError) as exc:
            raise TraceFormatError(f"{path}:{number}: {_reason(exc)} (a {fmt} trace has {EXPECTED[fmt]})") from exc


def _json_rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    for number, line in enumerate(_lines(path), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise TraceFormatError(f"{path}:{number}: not a JSON object ({exc})") from exc
        if not isinstance(row, dict):
            raise TraceFormatError(f"{path}:{number}: not a JSON object")
        yield number, row


def _csv_rows(path: Path) -> Iterator[tuple[int, Mapping[str, Any]]]:
    with path.open(encoding="utf-8", newline="") as handle:
        reader = csv.DictReader(handle)
        for row in reader:
            yield reader.line_num, row


def _record(row: Mapping[str, Any], fmt: TraceFormat) -> TraceRecord:
    if fmt == "azure":
        return TraceRecord(_seconds(str(row["TIMESTAMP"])), _count(row, "ContextTokens"),
                           _count(row, "GeneratedTokens"))
    if fmt == "mooncake":
        return TraceRecord(_number(row, "timestamp") / 1000.0, _count(row, "input_length"),
                           _count(row, "output_length"), prefix_blocks=_hashes(row.get("hash_ids")),
                           block_tokens=MOONCAKE_BLOCK_TOKENS)
    block_tokens = _count(row, "block_tokens") if row.get("block_tokens") not in (None, "") else DEFAULT_BLOCK_TOKENS
    if block_tokens < 1:
        raise ValueError("block_tokens must be >= 1")
    return TraceRecord(_number(row, "arrival_s"), _count(row, "prompt_tokens"), _count(row, "output_tokens"),
                       _text(row, "tenant"), _text(row, "tier"), _text(row, "model"),
                       _hashes(row.get("prefix_blocks")), block_tokens)


def _number(row: Mapping[str, Any], column: str) -> float:
    if row.get(column) in (None, ""):
        raise KeyError(column)
    value = float(row[column])
    if not value >= 0 or value == float("inf"):
        raise ValueError(f"{column} is {row[column]!r}: a finite number >= 0 is needed")
    return value


def _count(row: Mapping[str, Any], column: str) -> int:
    value = _number(row, column)
    if value != int(value):
        raise ValueError(f"{column} is {row[column]!r}: a whole number is needed")
    return int(value)


def _text(row: Mapping[str, Any], column: str) -> str | None:
    value = row.get(column)
    return None if value in (None, "") else str(value)


def _hashes(value: Any) -> tuple[int, ...]:
    if value in (None, ""):
        return ()
    items = value.split() if isinstance(value, str) else value
    if not isinstance(items, list | tuple):
        raise ValueError("prefix_blocks / hash_ids must be a list of integers")
    return tuple(int(v) for v in items)


def _reason(exc: Exception) -> str:
    if isinstance(exc, KeyError):
        return f"column {exc.args[0]!r} is missing or empty"
    return str(exc)


def load_items(trace: str, traces_dir: Path = DEFAULT_TRACES_DIR) -> list[TraceItem]:
    """The workload of ``trace``: a shipped Azure trace by name (``conv``, ``code``) or a trace file."""
    if trace in AZURE:
        return load_azure(trace, traces_dir)
    return [record.item for record in read_trace(Path(trace))]
