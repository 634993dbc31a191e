"""Sentence embeddings with all-MiniLM-L6-v2 on ONNX Runtime (no torch at serving time).

``SentenceEncoder.encode(texts)`` returns L2-normalised float32 vectors [N, 384]; inputs longer
than ``max_tokens`` are truncated here as a last resort (the gateway rejects them before they
arrive). Rows run in length buckets (``python_backends/length_buckets.py``; ``bucket_overhead_tokens``
None: one call padded to the longest row). ``EmbedHandler`` adapts it to the batched-model
contract: input ``text`` (one string per row), output ``embedding``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
from tokenizers import Encoding, Tokenizer

from python_backends.batching import InvalidInputError, Tensors, decode_texts, onnx_session
from python_backends.length_buckets import DEFAULT_CALL_OVERHEAD_TOKENS, run_bucketed


def load_tokenizer(model_dir: Path, max_tokens: int) -> Tokenizer:
    """The model's fast tokenizer, truncating at ``max_tokens``, without padding."""
    tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    tokenizer.enable_truncation(max_length=max_tokens)
    tokenizer.no_padding()
    return tokenizer


def pad_encodings(encodings: Sequence[Encoding]) -> dict[str, np.ndarray]:
    """BERT-style inputs (int64 [N, T], right-padded with 0) for a list of encodings."""
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    types = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        n = len(encoding.ids)
        ids[row, :n] = encoding.ids
        mask[row, :n] = 1
        types[row, :n] = encoding.type_ids
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}


class SentenceEncoder:
    """all-MiniLM-L6-v2 exported by ``control/assets/minilm.py``."""

    def __init__(self, model_dir: Path, max_tokens: int = 256, intra_op_threads: int = 1,
                 bucket_overhead_tokens: int | None = DEFAULT_CALL_OVERHEAD_TOKENS) -> None:
        self.tokenizer = load_tokenizer(model_dir, max_tokens)
        self.session = onnx_session(str(model_dir / "model.onnx"), intra_op_threads)
        self.bucket_overhead_tokens = bucket_overhead_tokens

    def embed_encodings(self, encodings: Sequence[Encoding]) -> np.ndarray:
        def run(rows: Sequence[Encoding]) -> np.ndarray:
            result: np.ndarray = self.session.run(["sentence_embedding"], pad_encodings(rows))[0]
            return result.astype(np.float32, copy=False)
        return run_bucketed([len(e.ids) for e in encodings], lambda rows: run([encodings[i] for i in rows]),
                            self.bucket_overhead_tokens)

    def encode(self, texts: Sequence[str]) -> np.ndarray:
        return self.embed_encodings(self.tokenizer.encode_batch(list(texts)))


class EmbedHandler:
    """Batched-model handler: ``text`` [rows, 1] -> ``embedding`` [rows, 384]."""

    def __init__(self, encoder: SentenceEncoder) -> None:
        self.encoder = encoder

    def prepare(self, inputs: Tensors) -> list[Encoding]:
        texts = decode_texts(inputs, "text")
        if any(not t for t in texts):
            raise InvalidInputError("text", "empty string")
        return list(self.encoder.tokenizer.encode_batch(texts))

    def infer(self, prepared: Sequence[list[Encoding]]) -> list[Tensors]:
        flat = [e for request in prepared for e in request]
        vectors = self.encoder.embed_encodings(flat)
        outputs, start = [], 0
        for request in prepared:
            outputs.append({"embedding": vectors[start : start + len(request)]})
            start += len(request)
        return outputs


def build_handler(model_dir: Path, params: dict[str, str]) -> EmbedHandler:
    encoder = SentenceEncoder(
        model_dir,
        max_tokens=int(params.get("max_tokens", "256")),
        intra_op_threads=int(params.get("intra_op_threads", "1")),
        bucket_overhead_tokens=bucket_overhead(params),
    )
    return EmbedHandler(encoder)


def bucket_overhead(params: dict[str, str]) -> int | None:
    """The model parameter ``bucket_overhead_tokens`` (``off``: no length buckets)."""
    value = params.get("bucket_overhead_tokens", str(DEFAULT_CALL_OVERHEAD_TOKENS))
    return None if value == "off" else int(value)
