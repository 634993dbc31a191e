"""The embed, rerank and tabular handlers on their real artifacts (ONNX Runtime, no Triton)."""

from pathlib import Path

import numpy as np
import pytest

from python_backends.batching import InvalidInputError, run_batch
from python_backends.embed.encoder import SentenceEncoder, build_handler
from python_backends.rerank.scorer import CROSS_ENCODER_FILE, BiEncoderScorer, CrossEncoderScorer, RerankHandler
from python_backends.tabular.classifier import TabularHandler


@pytest.fixture(scope="module")
def encoder(artifacts_dir: Path) -> SentenceEncoder:
    return SentenceEncoder(artifacts_dir / "embed")


def test_embeddings_are_unit_vectors_and_capture_meaning(encoder: SentenceEncoder) -> None:
    cat, kitten, stocks = encoder.encode(["A cat sleeps on the sofa.", "A kitten naps on the couch.",
                                          "Stock markets fell sharply today."])
    assert np.allclose(np.linalg.norm([cat, kitten, stocks], axis=1), 1.0, atol=1e-5)
    assert cat @ kitten > 0.6 > cat @ stocks


def test_embedding_of_a_text_does_not_depend_on_its_batch(encoder: SentenceEncoder) -> None:
    alone = encoder.encode(["short"])[0]
    batched = encoder.encode(["short", "a much longer sentence that forces padding of the short one"])[0]
    assert np.allclose(alone, batched, atol=1e-5)


def test_embed_handler_rejects_empty_text_alone(artifacts_dir: Path) -> None:
    handler = build_handler(artifacts_dir / "embed", {})
    ok, bad = run_batch(handler, [{"text": np.array([[b"hello"]], dtype=object)},
                                  {"text": np.array([[b""]], dtype=object)}])
    assert isinstance(bad, InvalidInputError)
    assert ok["embedding"].shape == (1, 384)  # type: ignore[index]


def test_bi_encoder_reranks_the_relevant_document_first(encoder: SentenceEncoder) -> None:
    docs = ["Bananas are rich in potassium.", "Paris is the capital and largest city of France.",
            "The Eiffel Tower was finished in 1889."]
    scores = BiEncoderScorer(encoder).score(["What is the capital of France?"] * 3, docs)
    assert int(np.argmax(scores)) == 1
    assert ((scores >= 0) & (scores <= 1)).all()


def test_a_pushed_cross_encoder_onnx_is_used_for_pairs(artifacts_dir: Path, tmp_path: Path) -> None:
    torch = pytest.importorskip("torch")
    from transformers import AutoModel

    from control.assets.minilm import minilm_source_dir

    torch.manual_seed(0)
    body = AutoModel.from_pretrained(str(minilm_source_dir()), local_files_only=True).eval()
    head = torch.nn.Linear(384, 1)

    class CrossEncoder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.body, self.head = body, head

        def forward(self, input_ids, attention_mask, token_type_ids):  # type: ignore[no-untyped-def]
            hidden = self.body(input_ids=input_ids, attention_mask=attention_mask,
                               token_type_ids=token_type_ids).last_hidden_state
            return self.head(hidden[:, 0])

    model = CrossEncoder().eval()
    (tmp_path / "tokenizer.json").write_bytes((artifacts_dir / "rerank" / "tokenizer.json").read_bytes())
    ids = torch.tensor([[101, 2054, 102, 3000, 102]])
    torch.onnx.export(model, (ids, torch.ones_like(ids), torch.zeros_like(ids)), str(tmp_path / CROSS_ENCODER_FILE),
                      input_names=["input_ids", "attention_mask", "token_type_ids"], output_names=["logits"],
                      dynamic_axes={n: {0: "b", 1: "t"} for n in ("input_ids", "attention_mask", "token_type_ids")},
                      opset_version=17, dynamo=False)
    scorer = CrossEncoderScorer(tmp_path, max_tokens=256, intra_op_threads=1)
    queries, docs = ["capital of France?", "capital of France?"], ["Paris.", "Bananas are yellow."]
    encoded = scorer.tokenizer.encode_batch(list(zip(queries, docs, strict=True)))
    expected = []
    with torch.no_grad():
        for e in encoded:
            t = torch.tensor([e.ids])
            expected.append(torch.sigmoid(model(t, torch.ones_like(t), torch.tensor([e.type_ids]))).item())
    assert np.allclose(scorer.score(queries, docs), expected, atol=1e-4)
    handler = RerankHandler(scorer)
    [out] = run_batch(handler, [{"query": np.array([[q.encode()] for q in queries], dtype=object),
                                 "document": np.array([[d.encode()] for d in docs], dtype=object)}])
    assert out["score"].shape == (2, 1)  # type: ignore[index]


def test_tabular_mlp_classifies_held_out_digits(artifacts_dir: Path) -> None:
    from sklearn.datasets import load_digits

    digits = load_digits()
    handler = TabularHandler(artifacts_dir / "tabular")
    [out] = run_batch(handler, [{"features": digits.data.astype(np.float32)}])
    accuracy = float((out["class_id"].reshape(-1) == digits.target).mean())  # type: ignore[index]
    assert accuracy > 0.95
    [bad] = run_batch(handler, [{"features": np.full((1, 64), np.inf, np.float32)}])
    assert isinstance(bad, InvalidInputError)
