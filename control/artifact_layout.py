"""The files an artifact version of each workload kind must hold, checked before it is signed
(``shunter models push``) and again when control registers it.

Derived from what each kind loads (``python_backends/<kind>``, and the gateway's tokenizer):

======== ================================ =============================================
kind     required                         optional
======== ================================ =============================================
llm      ``model.gguf`` (or the model's   ``generation_config.json``
         ``model_file`` parameter)
embedding ``model.onnx``, ``tokenizer.json``
rerank   ``tokenizer.json`` and one of    —
         ``model.onnx`` (bi-encoder) or
         ``cross_encoder.onnx``
vision   ``model.onnx``, ``labels.txt``
tabular  ``model.onnx``                   ``metrics.json``
======== ================================ =============================================

An artifact is flat: files in subfolders, or any other file, are refused too (they would be
copied into the Triton repository and never read). Hidden entries (``.git``, ``.complete``) and
the manifest and signature that signing adds are not part of the layout.
``ArtifactLayoutError`` (code ``bad_layout``, HTTP 422) names every missing and unexpected file
and the layout expected.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from control.errors import ControlError
from control.integrity import MANIFEST_NAME, SIGNATURE_NAME
from settings.stack import ModelSpec, WorkloadKind

LLM_MODEL_FILE_PARAMETER = "model_file"


class ArtifactLayoutError(ControlError, ValueError):
    """An artifact's files do not match its kind's layout (``code`` ``bad_layout``)."""

    code = "bad_layout"


@dataclass(frozen=True, slots=True)
class Layout:
    """The files of one kind's artifact: all of ``required``, at least one of ``one_of`` (when
    given), any of ``optional``; nothing else."""

    required: tuple[str, ...]
    one_of: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()

    def describe(self) -> str:
        parts = [" + ".join(self.required)]
        if self.one_of:
            parts.append("one of " + " / ".join(self.one_of))
        text = " + ".join(parts)
        return text + (f" (optional: {', '.join(self.optional)})" if self.optional else "")


LAYOUTS: dict[WorkloadKind, Layout] = {
    WorkloadKind.LLM: Layout(("model.gguf",), optional=("generation_config.json",)),
    WorkloadKind.EMBEDDING: Layout(("model.onnx", "tokenizer.json")),
    WorkloadKind.RERANK: Layout(("tokenizer.json",), one_of=("model.onnx", "cross_encoder.onnx")),
    WorkloadKind.VISION: Layout(("model.onnx", "labels.txt")),
    WorkloadKind.TABULAR: Layout(("model.onnx",), optional=("metrics.json",)),
}
_SIGNING_FILES = frozenset({MANIFEST_NAME, SIGNATURE_NAME})


def layout_for(spec: ModelSpec) -> Layout:
    """``spec``'s layout: its kind's, with an LLM's ``model_file`` parameter as its weights file."""
    layout = LAYOUTS[spec.kind]
    model_file = spec.parameters.get(LLM_MODEL_FILE_PARAMETER)
    if spec.kind is WorkloadKind.LLM and model_file:
        return Layout((model_file,), layout.one_of, layout.optional)
    return layout


def artifact_files(directory: Path) -> list[str]:
    """The relative POSIX paths of the files under ``directory`` that signing takes (no hidden entries)."""
    return sorted(path.relative_to(directory).as_posix() for path in directory.rglob("*")
                  if path.is_file() and not any(part.startswith(".") for part in path.relative_to(directory).parts))


def check_layout(spec: ModelSpec, files: Iterable[str]) -> None:
    """Raise ``ArtifactLayoutError`` unless ``files`` (relative paths) fit ``spec``'s layout."""
    layout = layout_for(spec)
    present = {name for name in files if name not in _SIGNING_FILES}
    missing = [name for name in layout.required if name not in present]
    if layout.one_of and not present & set(layout.one_of):
        missing.append(" or ".join(layout.one_of))
    allowed = {*layout.required, *layout.one_of, *layout.optional}
    unexpected = sorted(present - allowed)
    if not missing and not unexpected:
        return
    problems = ([f"missing {', '.join(missing)}"] if missing else []) + (
        [f"unexpected {', '.join(unexpected[:10])}" + (f" and {len(unexpected) - 10} more" if len(unexpected) > 10
                                                        else "")] if unexpected else [])
    raise ArtifactLayoutError(f"{spec.name} is a {spec.kind.value} model: its artifact must hold "
                              f"{layout.describe()}, in one flat folder; {'; '.join(problems)}")
