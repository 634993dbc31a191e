"""A local Prometheus on the loopback that scrapes the local stack (``shunter up --observe``).

``scrape_config(...)`` renders its configuration: the gateways (``/metrics``, with the bearer
token when ``gateway.yaml`` sets ``metrics_token_file``), control (the capacity and rollout
series) and every Triton worker, which Prometheus discovers from control's
``/admin/v1/prometheus/targets`` (HTTP service discovery, with the admin token), so replicas the
capacity controller starts are scraped too. The rules in ``deploy/observability/rules`` are loaded.

``LocalPrometheus.start()`` runs Debian's ``prometheus`` binary (``scripts/setup.sh`` installs it)
on ``127.0.0.1:<port>`` with its data under ``<state_dir>/prometheus``, waits (bounded) for
``/-/ready`` (``StackStartError`` naming its log otherwise), and ``stop()`` ends that process only.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path
from urllib.parse import urlparse

import yaml

from control.errors import ControlError
from control.stack import StackStartError, stop_process, wait_http_ok
from settings.paths import PROJECT_ROOT

RULES_DIR = PROJECT_ROOT / "deploy" / "observability" / "rules"


class PrometheusStartError(ControlError, RuntimeError):
    """``prometheus`` is not installed."""


def _host_port(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.hostname}:{parsed.port or 80}"


def scrape_config(gateway_urls: Sequence[str], control_url: str, admin_token_file: Path,
                  metrics_token_file: Path | None = None, interval_s: float = 5.0,
                  rule_files: Sequence[Path] = (RULES_DIR / "*.yml",)) -> dict[str, object]:
    """The configuration of a Prometheus that scrapes one stack (every ``interval_s``)."""
    gateway_job: dict[str, object] = {"job_name": "shunter-gateway",
                                      "static_configs": [{"targets": [_host_port(u) for u in gateway_urls]}]}
    if metrics_token_file is not None:
        gateway_job["authorization"] = {"type": "Bearer", "credentials_file": str(metrics_token_file)}
    return {
        "global": {"scrape_interval": f"{interval_s:g}s", "evaluation_interval": f"{interval_s:g}s"},
        "rule_files": [str(path) for path in rule_files],
        "scrape_configs": [
            gateway_job,
            {"job_name": "shunter-control", "static_configs": [{"targets": [_host_port(control_url)]}]},
            {"job_name": "triton", "http_sd_configs": [{
                "url": f"{control_url.rstrip('/')}/admin/v1/prometheus/targets",
                "refresh_interval": f"{max(interval_s, 5.0):g}s",
                # the type spelled out: Prometheus 2.42's HTTP discovery sends the bare token without it
                "authorization": {"type": "Bearer", "credentials_file": str(admin_token_file)}}]},
        ],
    }


class LocalPrometheus:
    def __init__(self, port: int, state_dir: Path, ready_timeout_s: float = 30.0) -> None:
        self.port = port
        self.state_dir = state_dir
        self.ready_timeout_s = ready_timeout_s
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.state_dir / "logs" / "prometheus.log"

    def start(self, config: dict[str, object], retention: str = "2d") -> None:
        binary = shutil.which("prometheus")
        if binary is None:
            raise PrometheusStartError("prometheus is not installed (scripts/setup.sh installs Debian's package)")
        data = self.state_dir / "prometheus"
        data.mkdir(parents=True, exist_ok=True)
        config_path = data / "prometheus.yml"
        config_path.write_text(yaml.safe_dump(config, sort_keys=False))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                [binary, f"--config.file={config_path}", f"--storage.tsdb.path={data / 'data'}",
                 f"--web.listen-address=127.0.0.1:{self.port}", f"--storage.tsdb.retention.time={retention}",
                 "--web.enable-lifecycle"], stdout=log, stderr=subprocess.STDOUT)
        self._wait_ready()

    def _wait_ready(self) -> None:
        assert self.process is not None
        try:
            wait_http_ok(f"{self.url}/-/ready", self.ready_timeout_s, self.process, self.log_path)
        except StackStartError:
            self.stop()
            raise

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process, timeout_s=10.0)
