"""Where the local stack keeps its files; one object built at the edge from CLI flags.

Everything a stack writes lives under its state directory, the rendered Triton model repository
included (``<state_dir>/model_repository`` unless given), so two stacks with two ``--state-dir``
on one machine never overwrite each other's files."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parent.parent
IN_STATE_DIR = Path("<state_dir>/model_repository")  # the default of ``StackPaths.repository``


@dataclass(frozen=True)
class StackPaths:
    config_dir: Path = PROJECT_ROOT / "config"
    state_dir: Path = PROJECT_ROOT / "var"
    repository: Path = IN_STATE_DIR  # the rendered Triton model repository; default under state_dir

    def __post_init__(self) -> None:
        if self.repository == IN_STATE_DIR:
            object.__setattr__(self, "repository", self.state_dir / "model_repository")

    @property
    def pools_file(self) -> Path:
        return self.config_dir / "pools.yaml"

    @property
    def models_file(self) -> Path:
        return self.config_dir / "models.yaml"

    @property
    def tenants_file(self) -> Path:
        return self.config_dir / "tenants.yaml"

    @property
    def scheduling_file(self) -> Path:
        return self.config_dir / "scheduling.yaml"

    @property
    def capacity_file(self) -> Path:
        return self.config_dir / "capacity.yaml"

    @property
    def control_file(self) -> Path:
        return self.config_dir / "control.yaml"

    @property
    def gateway_file(self) -> Path:
        return self.config_dir / "gateway.yaml"

    @property
    def observability_file(self) -> Path:
        return self.config_dir / "observability.yaml"

    @property
    def artifacts(self) -> Path:
        return self.state_dir / "artifacts"

    @property
    def logs(self) -> Path:
        return self.state_dir / "logs"

    @property
    def admin_token_file(self) -> Path:
        return self.state_dir / "admin.token"


def admin_token(paths: StackPaths) -> str:
    """The local admin token, created (mode 0600) on first use."""
    path = paths.admin_token_file
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(32))
    return path.read_text().strip()
