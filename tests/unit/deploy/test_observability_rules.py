"""deploy/observability: the rules and dashboards are what the configuration renders, promtool
accepts the rules and their unit tests pass, and the local Prometheus' configuration is valid."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from cli.observe.render import OBSERVABILITY_DIR, RULES_FILE, rendered_files
from control.prometheus import scrape_config
from settings.paths import StackPaths


def _promtool(*args: str) -> subprocess.CompletedProcess[str]:
    promtool = shutil.which("promtool")
    if promtool is None:
        pytest.fail("promtool is missing: scripts/setup.sh installs Debian's prometheus package")
    return subprocess.run([promtool, *args], capture_output=True, text=True, timeout=60, check=False)


def test_the_checked_in_rules_and_dashboards_are_what_the_configuration_renders() -> None:
    for relative, text in rendered_files(StackPaths()).items():
        assert (OBSERVABILITY_DIR / relative).read_text() == text, f"{relative}: run `shunter observe render`"


def test_each_tier_counts_first_tokens_after_its_own_ttft_objective() -> None:
    rules = yaml.safe_load((OBSERVABILITY_DIR / RULES_FILE).read_text())
    slow = [r["expr"] for g in rules["groups"] for r in g["rules"]
            if r.get("record") == "shunter:slo_bad_requests:rate5m" and r["labels"]["kind"] == "slow"]
    assert any('tier="premium",le="4.0"' in expr for expr in slow)  # scheduling.yaml: premium ttft_s 4.0
    assert any('tier="batch",le="30.0"' in expr for expr in slow)


def test_promtool_accepts_the_rules() -> None:
    checked = _promtool("check", "rules", str(OBSERVABILITY_DIR / RULES_FILE))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_the_alerts_fire_as_their_unit_tests_say() -> None:
    tested = _promtool("test", "rules", str(OBSERVABILITY_DIR / "tests" / "shunter.rules.test.yml"))
    assert tested.returncode == 0, tested.stdout + tested.stderr


def test_the_local_prometheus_configuration_is_valid(tmp_path: Path) -> None:
    token = tmp_path / "admin.token"
    token.write_text("t")
    config = scrape_config(["http://127.0.0.1:8080"], "http://127.0.0.1:8081", token, token)
    path = tmp_path / "prometheus.yml"
    path.write_text(yaml.safe_dump(config))
    checked = _promtool("check", "config", str(path))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    jobs = {job["job_name"] for job in config["scrape_configs"]}  # type: ignore[attr-defined]
    assert jobs == {"shunter-gateway", "shunter-control", "triton"}
