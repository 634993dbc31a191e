"""An LLM artifact's recommended sampling (its generation config), read once at startup.

Two places carry it, both optional: a Hugging Face ``generation_config.json`` beside the GGUF
(``temperature``, ``top_p``, ``top_k``; ``do_sample: false`` means greedy) and the GGUF's own
``general.sampling.temp`` / ``.top_p`` / ``.top_k`` metadata (llama.cpp's keys). The JSON file
wins where both set a field. ``models.yaml``'s ``sampling:`` overrides either
(``SamplingDefaults.over``); the gateway applies the result only to fields a request leaves out.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from settings.base import ConfigError
from settings.stack import SamplingDefaults

GENERATION_CONFIG = "generation_config.json"
_GGUF_KEYS = {"temperature": "general.sampling.temp", "top_p": "general.sampling.top_p",
              "top_k": "general.sampling.top_k"}


def _from_gguf(metadata: Mapping[str, str]) -> dict[str, Any]:
    return {name: metadata[key] for name, key in _GGUF_KEYS.items() if key in metadata}


def _from_json(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: not a readable JSON generation config: {exc}") from exc
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: a generation config is a JSON object")
    fields = {name: data[name] for name in ("temperature", "top_p", "top_k") if data.get(name) is not None}
    if data.get("do_sample") is False:
        fields = {"temperature": 0.0}
    return fields


def artifact_sampling(gguf_path: Path, metadata: Mapping[str, str]) -> SamplingDefaults:
    """The sampling defaults the artifact at ``gguf_path`` recommends (empty when it has none);
    ConfigError naming the file and field when a value is out of range."""
    fields = {**_from_gguf(metadata), **_from_json(gguf_path.parent / GENERATION_CONFIG)}
    try:
        return SamplingDefaults(**fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first["loc"])
        raise ConfigError(f"{gguf_path.parent / GENERATION_CONFIG}: {field}: {first['msg']}") from exc
