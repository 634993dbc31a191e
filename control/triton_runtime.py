"""Where the Triton server binary and its python backend live, and how a worker is launched.

On a CPU host the binary is the one shipped in the ``nvidia-pytriton`` wheel; its python backend
needs a backend directory assembled from the wheel (``libtriton_python.so``, the utils module and
the stub built for this Python), and an environment where the stub finds ``libpython3.11`` (the
lib dir of the interpreter that made the venv) and the venv (its ``bin/`` first on PATH). On a GPU
host ``TritonSettings.binary`` names the container's ``tritonserver`` and its own backends are used.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path

from control.errors import ControlError
from settings.stack import TritonSettings


class TritonNotFoundError(ControlError, RuntimeError):
    """No usable tritonserver binary."""


@dataclass(frozen=True)
class TritonRuntime:
    binary: Path
    backend_dir: Path | None
    env: dict[str, str]


def _wheel_root() -> Path | None:
    spec = importlib.util.find_spec("pytriton")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(next(iter(spec.submodule_search_locations)))


def _assemble_backend_dir(wheel: Path, target: Path) -> Path:
    """Copy the wheel's python backend and stub into ``target/python`` (idempotent)."""
    python_dir = target / "python"
    python_dir.mkdir(parents=True, exist_ok=True)
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    sources = [
        wheel / "tritonserver/backends/python/libtriton_python.so",
        wheel / "tritonserver/backends/python/triton_python_backend_utils.py",
        wheel / f"tritonserver/python_backend_stubs/{version}/triton_python_backend_stub",
    ]
    for source in sources:
        destination = python_dir / source.name
        if not destination.exists() or destination.stat().st_size != source.stat().st_size:
            shutil.copy2(source, destination)
    return target


def resolve_runtime(settings: TritonSettings, state_dir: Path) -> TritonRuntime:
    """The binary, backend dir and environment for workers; raise TritonNotFoundError."""
    env = dict(os.environ)
    venv_bin = str(Path(sys.executable).parent)
    env["PATH"] = venv_bin + os.pathsep + env.get("PATH", "")
    if settings.binary:
        found = shutil.which(settings.binary)
        if found is None:
            raise TritonNotFoundError(f"tritonserver binary {settings.binary!r} not found")
        return TritonRuntime(Path(found), None, env)
    wheel = _wheel_root()
    if wheel is None:
        raise TritonNotFoundError("nvidia-pytriton is not installed and no binary is configured")
    libs = [str(wheel.parent / "nvidia_pytriton.libs"), str(sysconfig.get_config_var("LIBDIR"))]
    if env.get("LD_LIBRARY_PATH"):
        libs.append(env["LD_LIBRARY_PATH"])
    env["LD_LIBRARY_PATH"] = os.pathsep.join(libs)
    backend_dir = _assemble_backend_dir(wheel, state_dir / "triton_backends")
    return TritonRuntime(wheel / "tritonserver/bin/tritonserver", backend_dir, env)
