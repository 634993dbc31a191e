"""Length buckets: the plan (pure) and the encoders on their real artifacts with and without it."""

from pathlib import Path

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from python_backends.embed.encoder import SentenceEncoder
from python_backends.length_buckets import padded_slots, plan_buckets, run_bucketed
from python_backends.rerank.scorer import CROSS_ENCODER_FILE, CrossEncoderScorer


@settings(max_examples=200, deadline=None)
@given(lengths=st.lists(st.integers(1, 256), min_size=1, max_size=64), overhead=st.integers(0, 200))
def test_every_row_lands_in_one_bucket_and_the_plan_never_costs_more_than_one_call(
        lengths: list[int], overhead: int) -> None:
    buckets = plan_buckets(lengths, overhead)
    assert sorted(i for bucket in buckets for i in bucket) == list(range(len(lengths)))
    cost = padded_slots(lengths, buckets) + overhead * len(buckets)
    assert cost <= len(lengths) * max(lengths) + overhead
    tops = [max(lengths[i] for i in bucket) for bucket in buckets]
    assert tops == sorted(tops), "buckets are ranges of the sorted lengths"


def test_a_long_outlier_gets_its_own_call_and_equal_rows_share_one() -> None:
    assert plan_buckets([10, 12, 11, 250], 32) == [[0, 2, 1], [3]]
    assert plan_buckets([40] * 16, 32) == [list(range(16))]


def test_results_come_back_in_the_rows_order() -> None:
    lengths = [5, 200, 7, 190, 6]
    out = run_bucketed(lengths, lambda rows: np.array([[lengths[i]] for i in rows]), 8)
    assert out[:, 0].tolist() == lengths


def test_bucketed_encoders_give_what_one_padded_call_gives(artifacts_dir: Path) -> None:
    texts = ["hi", "a cat", "word " * 200, "a short sentence about dogs", "stocks " * 90, "ok"]
    bucketed = SentenceEncoder(artifacts_dir / "embed").encode(texts)
    padded = SentenceEncoder(artifacts_dir / "embed", bucket_overhead_tokens=None).encode(texts)
    assert np.allclose(bucketed, padded, atol=1e-5)
    if (artifacts_dir / "rerank" / CROSS_ENCODER_FILE).is_file():
        queries = ["what is a cat"] * len(texts)
        a = CrossEncoderScorer(artifacts_dir / "rerank", 256, 1).score(queries, texts)
        b = CrossEncoderScorer(artifacts_dir / "rerank", 256, 1, None).score(queries, texts)
        assert np.allclose(a, b, atol=1e-5)
