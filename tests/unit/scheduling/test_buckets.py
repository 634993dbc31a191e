from hypothesis import given
from hypothesis import strategies as st

from scheduling.buckets import TokenBucket


def test_a_bucket_refills_at_its_rate_up_to_capacity() -> None:
    bucket = TokenBucket(capacity=10, rate_per_s=2)
    assert bucket.try_take(10, now=0.0)
    assert not bucket.try_take(1, now=0.1)
    assert bucket.try_take(4, now=2.0)
    assert bucket.available(now=100.0) == 10


def test_wait_s_is_the_deficit_over_the_rate() -> None:
    bucket = TokenBucket(capacity=10, rate_per_s=5)
    bucket.try_take(10, now=0.0)
    assert bucket.wait_s(5, now=0.0) == 1.0
    assert bucket.wait_s(11, now=0.0) == float("inf")


@given(st.lists(st.tuples(st.floats(0, 5), st.floats(0, 20), st.booleans()), max_size=60))
def test_buckets_never_exceed_capacity_or_go_negative(steps: list[tuple[float, float, bool]]) -> None:
    bucket = TokenBucket(capacity=10, rate_per_s=3)
    now = 0.0
    for advance_s, amount, give_back in steps:
        now += advance_s
        if give_back:
            bucket.give_back(amount, now)
        else:
            bucket.try_take(amount, now)
        assert 0.0 <= bucket.available(now) <= bucket.capacity


def test_a_clock_step_back_refills_nothing() -> None:
    bucket = TokenBucket(capacity=10, rate_per_s=1)
    bucket.try_take(10, now=5.0)
    assert bucket.available(now=1.0) == 0
