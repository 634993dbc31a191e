import numpy as np

from gateway.response_cache import ResponseCache


def test_a_tenant_never_reads_another_tenants_rows() -> None:
    cache = ResponseCache(max_entries=10)
    cache.store("alice", "embed", 1, ["secret"], np.ones((1, 3)))
    assert cache.lookup("bob", "embed", 1, ["secret"]) == [None]
    hit = cache.lookup("alice", "embed", 1, ["secret"])[0]
    assert hit is not None and hit.tolist() == [1.0, 1.0, 1.0]


def test_a_new_model_version_does_not_see_old_rows() -> None:
    cache = ResponseCache(max_entries=10)
    cache.store("alice", "embed", 1, ["x"], np.ones((1, 2)))
    assert cache.lookup("alice", "embed", 2, ["x"]) == [None]


def test_the_least_recently_used_rows_go_first() -> None:
    cache = ResponseCache(max_entries=2)
    cache.store("t", "embed", 1, ["a", "b"], np.zeros((2, 2)))
    cache.lookup("t", "embed", 1, ["a"])
    cache.store("t", "embed", 1, ["c"], np.zeros((1, 2)))
    assert len(cache) == 2
    assert [row is not None for row in cache.lookup("t", "embed", 1, ["a", "b", "c"])] == [True, False, True]


def test_a_stored_row_is_a_copy() -> None:
    cache = ResponseCache(max_entries=2)
    rows = np.zeros((1, 2))
    cache.store("t", "embed", 1, ["a"], rows)
    rows[0, 0] = 5
    hit = cache.lookup("t", "embed", 1, ["a"])[0]
    assert hit is not None and hit[0] == 0
