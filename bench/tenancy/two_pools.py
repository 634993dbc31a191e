"""A local stack with two pools of different capacity profiles, cost and region, plus a second
gateway running ``--policy fifo`` against the same workers, so both policies meet one workload.

Pools: ``large`` (profile ``cpu-large``: 4096-token context, dearer, region ``eu-west``) and
``small`` (profile ``cpu-small``: 1024-token context, cheaper, region ``us-east``); each serves
``chat`` (llama.cpp with one thread, so the two engines share the two cores) and ``embed``.
The tenants are the scenario's own (keys below), hashed into the config like any deployment's.
"""

from __future__ import annotations

import copy
import subprocess
from dataclasses import dataclass
from pathlib import Path

import yaml

from control.stack import Listen, LocalStack, start_gateway, stop_process
from scheduling.scheduler import Policy
from settings.paths import StackPaths
from settings.tenants import hash_api_key

SHIPPED = StackPaths()


@dataclass(frozen=True)
class TenantSpec:
    name: str
    tier: str
    key: str
    quotas: dict[str, float]
    regions: tuple[str, ...] = ()
    weight: float = 1.0


TENANTS = (
    TenantSpec("noisy", "standard", "noisy-key", {"requests_per_second": 2, "max_concurrent": 2,
                                                  "tokens_per_minute": 40000}),
    TenantSpec("quiet", "standard", "quiet-key", {"requests_per_second": 50, "max_concurrent": 16}),
    TenantSpec("eu-only", "premium", "eu-key", {"max_concurrent": 32}, regions=("eu-west",)),
    TenantSpec("eu-standard", "standard", "eu-standard-key", {"max_concurrent": 32}, regions=("eu-west",)),
    TenantSpec("gold", "premium", "gold-key", {"max_concurrent": 256}, weight=4),
    TenantSpec("silver", "standard", "silver-key", {"max_concurrent": 256}, weight=2),
    TenantSpec("bronze", "batch", "bronze-key", {"max_concurrent": 256}),
    *(TenantSpec(f"tenant-{i}", "standard", f"tenant-{i}-key", {"max_concurrent": 64}) for i in range(8)),
)
KEYS = {t.name: t.key for t in TENANTS}
PROFILES = {
    "cpu-large": {"memory_gib": 16, "max_batch_tokens": 16384, "max_context_tokens": 4096,
                  "prefill_tokens_per_s": 1500, "decode_tokens_per_s": 80, "cost_per_hour": 0.40,
                  "max_sequences": 8},
    "cpu-small": {"memory_gib": 4, "max_batch_tokens": 4096, "max_context_tokens": 1024,
                  "prefill_tokens_per_s": 1500, "decode_tokens_per_s": 80, "cost_per_hour": 0.10,
                  "max_sequences": 8},
}


@dataclass(frozen=True)
class Ports:
    gateway: int
    fifo_gateway: int
    control: int
    large_base: int
    small_base: int

    @classmethod
    def from_base(cls, base: int) -> Ports:
        return cls(base + 80, base + 90, base + 81, base, base + 10)


def write_two_pool_config(root: Path, ports: Ports) -> StackPaths:
    """Config and state dirs under ``root`` (artifacts linked to the built ones)."""
    config_dir, state_dir = root / "config", root / "state"
    config_dir.mkdir(parents=True)
    state_dir.mkdir(parents=True)
    (state_dir / "artifacts").symlink_to(SHIPPED.artifacts)
    pools = yaml.safe_load(SHIPPED.pools_file.read_text())
    pools["pools"] = [
        {"name": "large", "gpu_type": "cpu", "profile": "cpu-large", "region": "eu-west", "workers": 1,
         "base_port": ports.large_base, "models": ["chat", "embed"]},
        {"name": "small", "gpu_type": "cpu", "profile": "cpu-small", "region": "us-east", "workers": 1,
         "base_port": ports.small_base, "models": ["chat", "embed"]},
    ]
    models = yaml.safe_load(SHIPPED.models_file.read_text())
    for model in models["models"]:
        if model["name"] == "chat":
            model.setdefault("parameters", {})["n_threads"] = "1"
    scheduling = yaml.safe_load(SHIPPED.scheduling_file.read_text())
    scheduling["capacity_profiles"].update(copy.deepcopy(PROFILES))
    scheduling["slo"] = {"premium": {"ttft_s": 2.0, "tpot_s": 0.2, "deadline_s": 10},
                         "standard": {"ttft_s": 4.0, "tpot_s": 0.4, "deadline_s": 20},
                         "batch": {"ttft_s": 10.0, "tpot_s": 1.0, "deadline_s": 30}}
    scheduling["shed_wait_s"] = {"premium": None, "standard": 3.0, "batch": 1.0}
    tenants = {"tenants": [
        {"name": t.name, "tier": t.tier, "weight": t.weight, "api_key_sha256": [hash_api_key(t.key)],
         "quotas": t.quotas, "allowed_regions": list(t.regions)} for t in TENANTS]}
    for name, data in (("pools.yaml", pools), ("models.yaml", models), ("scheduling.yaml", scheduling),
                       ("tenants.yaml", tenants)):
        (config_dir / name).write_text(yaml.safe_dump(data, sort_keys=False))
    return StackPaths(config_dir=config_dir, state_dir=state_dir, repository=root / "repository")


class TwoPoolStack:
    """The stack (fair gateway) and a FIFO gateway on the same workers; ``stop`` ends both."""

    def __init__(self, root: Path, ports: Ports) -> None:
        self.paths = write_two_pool_config(root, ports)
        self.ports = ports
        self.stack = LocalStack(self.paths, Listen(gateway_port=ports.gateway, control_port=ports.control))
        self.fifo: subprocess.Popen[bytes] | None = None

    @property
    def fair_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.gateway}"

    @property
    def fifo_url(self) -> str:
        return f"http://127.0.0.1:{self.ports.fifo_gateway}"

    def start(self) -> None:
        self.stack.start(log=lambda _: None)
        try:
            listen = Listen(gateway_port=self.ports.fifo_gateway, policy=Policy.FIFO)
            self.fifo = start_gateway(self.paths, listen, self.paths.logs / "gateway-fifo.log")
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        if self.fifo is not None:
            stop_process(self.fifo)
        self.stack.stop()
