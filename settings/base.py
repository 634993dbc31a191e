"""The one base of every configuration type, the configuration error, and the YAML reader."""

from __future__ import annotations

from pathlib import Path

import yaml
from pydantic import BaseModel, ConfigDict


class StrictModel(BaseModel):
    """A configuration object: unknown fields are errors, and it never changes once read."""

    model_config = ConfigDict(extra="forbid", frozen=True)


class ConfigError(ValueError):
    """A configuration file is missing, unreadable or invalid; the message names the file and field."""


def read_yaml(path: Path) -> object:
    """The parsed YAML document at ``path``; ConfigError naming the file if it cannot be read."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc}") from exc
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {exc}") from exc
