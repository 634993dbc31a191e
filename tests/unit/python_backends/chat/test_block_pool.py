import pytest

from python_backends.chat.block_pool import BlockPool


def test_growth_allocates_whole_blocks_and_free_returns_them() -> None:
    pool = BlockPool(total_blocks=4, block_tokens=16)
    assert pool.grow(owner=1, tokens=17)
    assert (pool.held(1), pool.used_blocks) == (2, 2)
    assert pool.grow(owner=1, tokens=32)  # still two blocks
    assert pool.held(1) == 2
    assert pool.free(1) == 2
    assert pool.used_blocks == 0


def test_growth_past_capacity_allocates_nothing() -> None:
    pool = BlockPool(total_blocks=3, block_tokens=10)
    assert pool.grow(owner=1, tokens=20)
    assert not pool.can_hold(2, 11)
    assert not pool.grow(owner=2, tokens=11)
    assert (pool.held(2), pool.free_blocks) == (0, 1)


def test_a_pool_needs_a_block() -> None:
    with pytest.raises(ValueError):
        BlockPool(total_blocks=0, block_tokens=16)
