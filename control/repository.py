"""Render the Triton model repository from ``triton_configs/`` templates and built artifacts.

Contract: ``render_configs(model, gpu_type)`` returns the ``config.pbtxt`` text of every Triton
model that serves ``model`` on a pool of ``gpu_type``: one model, except an LLM on a GPU pool,
which is the TensorRT-LLM ensemble ``<name>`` over ``<name>_preprocessing``,
``<name>_tensorrt_llm`` and ``<name>_postprocessing`` (templates in ``triton_configs/llm_trtllm/``,
settings from the model's ``trtllm_*`` parameters, see ``trtllm_settings``).
``render_repository(config, artifacts_dir, out_dir, gpu_type)`` writes, for every model
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
from collections.abc import Mapping, Sequence
from pathlib import Path

import jinja2

from control.errors import ControlError
from settings.base import ConfigError
from settings.engine import cpu_engine_config, trtllm_settings, uses_trtllm
from settings.paths import PROJECT_ROOT
from settings.stack import ModelSpec, StackConfig, WorkloadKind

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


class RenderError(ControlError, RuntimeError):
    """The repository could not be rendered (a missing artifact or template)."""


def _environment() -> jinja2.Environment:
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES_DIR)),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
    )


_TRTLLM_STEPS = ("preprocessing", "tensorrt_llm", "postprocessing")


def _tidy(text: str) -> str:
    lines = [line.rstrip() for line in text.splitlines()]
    return "\n".join(line for line in lines if line) + "\n"


def render_config(model: ModelSpec, gpu_type: str, versions: Sequence[int] | None = None) -> str:
    """The ``config.pbtxt`` text of the model that clients call for ``model`` on ``gpu_type``."""
    return render_configs(model, gpu_type, versions)[model.name]


def render_configs(model: ModelSpec, gpu_type: str, versions: Sequence[int] | None = None) -> dict[str, str]:
    """Triton model name -> ``config.pbtxt`` text, for every Triton model serving ``model``, with a
    version policy listing exactly ``versions`` (default: the configured version). RenderError
    names a bad engine parameter."""
    try:
        return _render_configs(model, gpu_type, sorted(versions) if versions else [model.version])
    except ConfigError as exc:
        raise RenderError(str(exc)) from exc


def _render_configs(model: ModelSpec, gpu_type: str, versions: list[int]) -> dict[str, str]:
    env = _environment()
    if not uses_trtllm(model, gpu_type):
        if model.kind is WorkloadKind.LLM:
            model = share_engine_threads(model, len(versions))
        template = env.get_template(f"{model.kind.value}.pbtxt.j2")
        return {model.name: _tidy(template.render(model=model, gpu_type=gpu_type, versions=versions))}
    names = {step: f"{model.name}_{step}" for step in _TRTLLM_STEPS}
    settings = trtllm_settings(model)
    configs = {model.name: _tidy(env.get_template("llm_trtllm/ensemble.pbtxt.j2").render(
        model=model, names=names, versions=versions))}
    for step, name in names.items():
        template = env.get_template(f"llm_trtllm/{step}.pbtxt.j2")
        configs[name] = _tidy(template.render(model=model, name=name, trtllm=settings, versions=versions))
    return configs


def share_engine_threads(model: ModelSpec, versions: int) -> ModelSpec:
    """``model`` with its CPU engine's ``n_threads`` divided among the ``versions`` that Triton loads
    side by side (a canary, an A/B test, a rollback draining), at least one thread each.

    Every version runs its own llama.cpp engine on the same cores, and llama.cpp (OpenMP) meets
    its threads at a barrier after every operation of a step: when the engines' threads together
    outnumber the cores, each barrier waits for a descheduled thread. On this 2-core host two
    engines of 2 threads decoded 10-25 tokens/s each, two of 1 thread 64-66 each, and a rollback
    under load stalled (docs/benchmarks.md, "Settings chosen by measurement", the row "two versions
    of chat on the same cores").
    """
    if versions <= 1:
        return model
    shared = max(1, cpu_engine_config(model).n_threads // versions)
    return model.model_copy(update={"parameters": {**model.parameters, "n_threads": str(shared)}})


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


def _build_trtllm_dirs(model: ModelSpec, gpu_type: str, versions: Sequence[int], staging: Path) -> list[str]:
    """The TensorRT-LLM ensemble's model directories (configs and empty version directories; the
    engine is read from ``trtllm_engine_dir`` on the GPU host). Returns the names, ensemble first."""
    names = []
    for name, text in render_configs(model, gpu_type, versions).items():
        for version in versions:
            (staging / name / str(version)).mkdir(parents=True)
        (staging / name / "config.pbtxt").write_text(text, encoding="utf-8")
        names.append(name)
    return names


def _build_model_dir(model: ModelSpec, sources: Mapping[int, Path], gpu_type: str, target: Path) -> None:
    target.mkdir(parents=True)
    (target / "config.pbtxt").write_text(render_config(model, gpu_type, list(sources)), encoding="utf-8")
    adapter = BACKENDS_DIR / _BACKEND_PACKAGE[model.kind] / "model.py"
    for version, source in sorted(sources.items()):
        if not source.is_dir():
            raise RenderError(f"model {model.name} version {version}: no artifacts in {source}")
        version_dir = target / str(version)
        version_dir.mkdir()
        shutil.copy2(adapter, version_dir / "model.py")
        for item in sorted(source.iterdir()):
            if item.is_file():
                _place(item, version_dir / item.name)
    _write_warmup(model, target)


def render_model(model: ModelSpec, sources: Mapping[int, Path], out_dir: Path, gpu_type: str = "cpu") -> list[str]:
    """Render ``model`` serving exactly the versions in ``sources`` (version -> directory of its
    verified files) into ``out_dir``, swapping each Triton model directory in by rename; return
    the Triton model names written."""
    if not sources:
        raise RenderError(f"model {model.name}: no versions to render")
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=out_dir))
    try:
        if uses_trtllm(model, gpu_type):
            names = _build_trtllm_dirs(model, gpu_type, sorted(sources), staging / "models")
        else:
            _build_model_dir(model, sources, gpu_type, staging / "models" / model.name)
            names = [model.name]
        for name in names:
            final = out_dir / name
            if final.exists():
                final.rename(staging / f"retired-{name}")
            (staging / "models" / name).rename(final)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return names


def render_repository(
    config: StackConfig, artifacts_dir: Path, out_dir: Path, gpu_type: str = "cpu"
) -> list[str]:
    """Render every model of ``config`` at its configured version, from ``artifacts_dir/<model>``,
    into ``out_dir``; return the model names rendered."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rendered = []
    for model in config.models:
        source = artifacts_dir / model.name
        if not uses_trtllm(model, gpu_type) and not source.is_dir():
            raise RenderError(f"model {model.name}: no artifacts in {source}; run `make setup`")
        render_model(model, {model.version: source}, out_dir, gpu_type)
        rendered.append(model.name)
    return rendered
