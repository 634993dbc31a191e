"""Query-document relevance for ``/v1/rerank``.

No cross-encoder with shipped weights exists in the package registries, so the default scorer is
the bi-encoder all-MiniLM-L6-v2: ``relevance = (1 + cos(q, d)) / 2`` in [0, 1]. When the model's
version directory holds ``cross_encoder.onnx`` (pushed as an artifact, with its
``tokenizer.json``), that cross-encoder scores the pairs instead: ``relevance = sigmoid(logit)``
of its first output column, inputs ``input_ids``/``attention_mask`` (+ ``token_type_ids`` when the
graph has it).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np
from tokenizers import Encoding

from python_backends.batching import InvalidInputError, Tensors, decode_texts, onnx_session
from python_backends.embed.encoder import SentenceEncoder, bucket_overhead, load_tokenizer, pad_encodings
from python_backends.length_buckets import DEFAULT_CALL_OVERHEAD_TOKENS, run_bucketed

CROSS_ENCODER_FILE = "cross_encoder.onnx"


class PairScorer(Protocol):
    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray: ...


class BiEncoderScorer:
    def __init__(self, encoder: SentenceEncoder) -> None:
        self.encoder = encoder

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        unique_queries = sorted(set(queries))
        query_vectors = dict(zip(unique_queries, self.encoder.encode(unique_queries), strict=True))
        doc_vectors = self.encoder.encode(documents)
        q = np.stack([query_vectors[text] for text in queries])
        cosine = np.sum(q * doc_vectors, axis=1)
        return ((1.0 + cosine) / 2.0).astype(np.float32)


class CrossEncoderScorer:
    def __init__(self, model_dir: Path, max_tokens: int, intra_op_threads: int,
                 bucket_overhead_tokens: int | None = DEFAULT_CALL_OVERHEAD_TOKENS) -> None:
        self.tokenizer = load_tokenizer(model_dir, max_tokens)
        self.session = onnx_session(str(model_dir / CROSS_ENCODER_FILE), intra_op_threads)
        self.input_names = {i.name for i in self.session.get_inputs()}
        self.bucket_overhead_tokens = bucket_overhead_tokens

    def score(self, queries: Sequence[str], documents: Sequence[str]) -> np.ndarray:
        encodings = self.tokenizer.encode_batch(list(zip(queries, documents, strict=True)))
        def run(rows: Sequence[Encoding]) -> np.ndarray:
            feeds = pad_encodings(rows)
            logits = self.session.run(None, {k: v for k, v in feeds.items() if k in self.input_names})[0]
            return np.asarray(logits, dtype=np.float32).reshape(len(rows), -1)[:, 0]
        first = run_bucketed([len(e.ids) for e in encodings], lambda rows: run([encodings[i] for i in rows]),
                             self.bucket_overhead_tokens)
        return (1.0 / (1.0 + np.exp(-first))).astype(np.float32)


class RerankHandler:
    """Batched-model handler: ``query``, ``document`` [rows, 1] -> ``score`` [rows, 1]."""

    def __init__(self, scorer: PairScorer) -> None:
        self.scorer = scorer

    def prepare(self, inputs: Tensors) -> tuple[list[str], list[str]]:
        queries, documents = decode_texts(inputs, "query"), decode_texts(inputs, "document")
        if len(queries) != len(documents):
            raise InvalidInputError("document", "needs as many rows as query")
        if any(not q for q in queries):
            raise InvalidInputError("query", "empty string")
        return queries, documents

    def infer(self, prepared: Sequence[tuple[list[str], list[str]]]) -> list[Tensors]:
        queries = [q for request in prepared for q in request[0]]
        documents = [d for request in prepared for d in request[1]]
        scores = self.scorer.score(queries, documents).reshape(-1, 1)
        outputs: list[Tensors] = []
        start = 0
        for request in prepared:
            outputs.append({"score": scores[start : start + len(request[0])]})
            start += len(request[0])
        return outputs


def load_scorer(model_dir: Path, params: dict[str, str]) -> Any:
    max_tokens = int(params.get("max_tokens", "256"))
    threads = int(params.get("intra_op_threads", "1"))
    overhead = bucket_overhead(params)
    if (model_dir / CROSS_ENCODER_FILE).is_file():
        return CrossEncoderScorer(model_dir, max_tokens, threads, overhead)
    return BiEncoderScorer(SentenceEncoder(model_dir, max_tokens, threads, overhead))


def build_handler(model_dir: Path, params: dict[str, str]) -> RerankHandler:
    return RerankHandler(load_scorer(model_dir, params))
