"""Capacity profiles: validation and the decode cost model."""

from dataclasses import replace

import pytest

from scheduling.capacity import CapacityProfile
from tests.unit.scheduling.factories import BIG


def test_decode_cost_per_token_is_one_iteration_over_the_batch_the_kv_pool_allows() -> None:
    profile = replace(BIG, max_sequences=256, decode_step_s=0.01, kv_read_s_per_token=1e-7)
    short = profile.decode_s_per_token(100, kv_capacity_tokens=100_000)  # 256 sequences fit
    long = profile.decode_s_per_token(2000, kv_capacity_tokens=100_000)  # only 50 fit
    assert short == pytest.approx((0.01 + 1e-7 * 256 * 100) / 256)
    assert long == pytest.approx((0.01 + 1e-7 * 50 * 2000) / 50)
    assert long is not None and short is not None and long > short


def test_a_sequence_larger_than_the_kv_pool_decodes_alone() -> None:
    profile = replace(BIG, decode_step_s=0.01, kv_read_s_per_token=1e-7)
    assert profile.decode_s_per_token(5000, kv_capacity_tokens=1000) == pytest.approx(0.01 + 1e-7 * 5000)


def test_without_a_decode_model_there_is_no_decode_cost_per_token() -> None:
    assert BIG.decode_s_per_token(100, kv_capacity_tokens=8192) is None


@pytest.mark.parametrize("fields", [{"decode_step_s": 0.0}, {"kv_read_s_per_token": -1.0}])
def test_a_decode_model_with_impossible_times_is_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match="decode_step_s"):
        CapacityProfile("x", 24, 1000, 1000, 100.0, 100.0, 1.0, **fields)  # type: ignore[arg-type]
