"""Render the Triton model repository from ``triton_configs/`` templates and built artifacts.

Contract: ``render_repository(config, artifacts_dir, out_dir, gpu_type)`` writes, for every model
in ``config``, ``out_dir/<model>/config.pbtxt`` (template of its workload kind, a version policy
listing exactly the served version), ``out_dir/<model>/<version>/model.py`` (the thin python
backend adapter of its kind) plus the model's artifact files, and the warmup samples under
``out_dir/<model>/warmup/``. Each model directory is built in a temporary sibling and swapped in
by rename, so a Triton that polls or loads the repository never sees a half-written model.
"""

from __future__ import annotations

import os
import shutil
import struct
import tempfile
from pathlib import Path

import jinja2

from control.config import ModelSpec, StackConfig, WorkloadKind

PROJECT_ROOT = Path(__file__).resolve().parent.parent
TEMPLATES_DIR = PROJECT_ROOT / "triton_configs"
BACKENDS_DIR = PROJECT_ROOT / "python_backends"

# Workload kind -> python backend package holding its model.py.
_BACKEND_PACKAGE = {
    WorkloadKind.LLM: "chat",
    WorkloadKind.EMBEDDING: "embed",
    WorkloadKind.RERANK: "rerank",
    WorkloadKind.VISION: "vision",
    WorkloadKind.TABULAR: "tabular",
}

_WARMUP_TEXT = "Shunter warms this model up before it takes traffic."


class RenderError(RuntimeError):
    """The repository could not be rendered (a missing artifact or template)."""


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


def render_config(model: ModelSpec, gpu_type: str) -> str:
    """The ``config.pbtxt`` text of ``model`` for a pool of ``gpu_type``."""
    template = _environment().get_template(f"{model.kind.value}.pbtxt.j2")
    text = template.render(model=model, gpu_type=gpu_type, versions=[model.version])
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line) + "\n"


def _encode_bytes_tensor(values: list[bytes]) -> bytes:
    """Triton's raw layout of a TYPE_STRING tensor: 4-byte LE length, then the bytes."""
    return b"".join(struct.pack("<I", len(v)) + v for v in values)


def _write_warmup(model: ModelSpec, model_dir: Path) -> None:
    """Sample inputs named by the template's ``model_warmup`` (the LLM warms up in initialize)."""
    samples: dict[str, bytes] = {}
    if model.kind in (WorkloadKind.EMBEDDING, WorkloadKind.RERANK):
        samples["text_sample"] = _encode_bytes_tensor([_WARMUP_TEXT.encode()])
    elif model.kind is WorkloadKind.VISION:
        image = (BACKENDS_DIR / "vision" / "warmup.png").read_bytes()
        samples["image_sample"] = _encode_bytes_tensor([image])
    if not model.warmup or not samples:
        return
    (model_dir / "warmup").mkdir()
    for name, data in samples.items():
        (model_dir / "warmup" / name).write_bytes(data)


def _place(src: Path, dst: Path) -> None:
    """Hard-link ``src`` to ``dst`` when on one file system, else copy it."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def _build_model_dir(model: ModelSpec, artifacts_dir: Path, gpu_type: str, target: Path) -> None:
    source = artifacts_dir / model.name
    if not source.is_dir():
        raise RenderError(f"model {model.name}: no artifacts in {source}; run `make setup`")
    version_dir = target / str(model.version)
    version_dir.mkdir(parents=True)
    (target / "config.pbtxt").write_text(render_config(model, gpu_type), encoding="utf-8")
    adapter = BACKENDS_DIR / _BACKEND_PACKAGE[model.kind] / "model.py"
    shutil.copy2(adapter, version_dir / "model.py")
    for item in sorted(source.iterdir()):
        if item.is_file():
            _place(item, version_dir / item.name)
    _write_warmup(model, target)


def render_repository(
    config: StackConfig, artifacts_dir: Path, out_dir: Path, gpu_type: str = "cpu"
) -> list[str]:
    """Render every model of ``config`` into ``out_dir``; return the model names rendered."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered = []
    for model in config.models:
        staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=out_dir))
        try:
            _build_model_dir(model, artifacts_dir, gpu_type, staging / "model")
            final = out_dir / model.name
            retired = staging / "retired"
            if final.exists():
                final.rename(retired)
            (staging / "model").rename(final)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        rendered.append(model.name)
    return rendered
