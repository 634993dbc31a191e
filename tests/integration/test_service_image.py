"""The gateway/control image's Python environment, rebuilt here without Docker: a clean virtualenv
(no system site-packages, not this project's venv) with only deploy/docker/requirements-service.txt
installed, then the gateway, control and the cluster CLI imported from the source tree, their entry
points' ``--help`` run, and torch checked absent.

The venv is made and filled by ``uv`` (a pinned dev requirement: it installs in parallel, several
minutes faster than pip on a fresh machine, which is what CI is) and cached under
``~/.cache/shunter/image-venvs/<hash of the requirements>`` (a stamp file marks a complete
install), so only a change of the requirements reinstalls. llama-cpp-python comes from the wheel
scripts/setup.sh compiled into ``~/.cache/shunter/wheels`` when it is there.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from settings.paths import PROJECT_ROOT

pytestmark = pytest.mark.integration

REQUIREMENTS = PROJECT_ROOT / "deploy" / "docker" / "requirements-service.txt"
CACHE = Path(os.environ.get("SHUNTER_IMAGE_VENV_CACHE", Path.home() / ".cache" / "shunter" / "image-venvs"))
WHEELS = Path(os.environ.get("SHUNTER_WHEEL_CACHE", Path.home() / ".cache" / "shunter" / "wheels"))
IMPORTS = """
import sys
import gateway.app, gateway.__main__, gateway.tokenization
import control.service, control.__main__, control.control_plane, control.s3_repository
import cli.kubernetes
import llama_cpp, psycopg
assert "torch" not in sys.modules, "torch was imported"
assert not any(p.endswith("/.venv/lib/python3.11/site-packages") for p in sys.path), sys.path
print("imports ok")
"""


def _python() -> str:
    base = getattr(sys, "_base_executable", None) or shutil.which("python3.11") or sys.executable
    return str(base)


@pytest.fixture(scope="module")
def image_venv() -> Path:
    digest = hashlib.sha256(REQUIREMENTS.read_bytes()).hexdigest()[:16]
    venv = CACHE / digest
    stamp = venv / ".complete"
    if stamp.exists():
        return venv
    shutil.rmtree(venv, ignore_errors=True)
    venv.parent.mkdir(parents=True, exist_ok=True)
    uv = str(Path(sys.executable).parent / "uv")
    subprocess.run([uv, "venv", "-q", "--python", _python(), str(venv)], check=True, timeout=120)
    links = [f"--find-links={d}" for d in sorted(WHEELS.glob("llama-*")) if d.is_dir()]
    result = subprocess.run([uv, "pip", "install", "-q", "--python", str(venv / "bin" / "python"), *links,
                             "-r", str(REQUIREMENTS)], capture_output=True, text=True, timeout=1500, check=False)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    stamp.write_text(digest)
    return venv


def _run(venv: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "PYTHONPATH": str(PROJECT_ROOT), "HOME": str(Path.home()),
           "PYTHONNOUSERSITE": "1"}
    return subprocess.run([str(venv / "bin" / "python"), *args], capture_output=True, text=True, timeout=300,
                          env=env, cwd=str(PROJECT_ROOT), check=False)


def test_the_service_requirements_satisfy_every_import_of_gateway_and_control(image_venv: Path) -> None:
    result = _run(image_venv, "-c", IMPORTS)
    assert result.returncode == 0 and "imports ok" in result.stdout, result.stderr[-4000:]


@pytest.mark.parametrize("module", ["gateway", "control", "cli.kubernetes"])
def test_the_entry_points_start(image_venv: Path, module: str) -> None:
    result = _run(image_venv, "-m", module, "--help")
    assert result.returncode == 0, result.stderr[-4000:]
    assert "Usage" in result.stdout
