from bench.triton_stats import TritonCounts, batch_shape, queue_wait


def test_batch_shape_is_rows_per_request_and_per_execution_between_two_readings() -> None:
    before = TritonCounts(rows=100, executions=10, requests=50)
    after = TritonCounts(rows=340, executions=70, requests=150)
    assert batch_shape(before, after) == {"rows_per_request": 2.4, "rows_per_execution": 4.0}


def test_batch_shape_is_empty_when_triton_could_not_be_read_or_nothing_ran() -> None:
    counts = TritonCounts(rows=5, executions=5, requests=5)
    assert batch_shape(None, counts) == {}
    assert batch_shape(counts, None) == {}
    assert batch_shape(counts, counts) == {}


def test_queue_wait_is_the_mean_wait_of_the_requests_queued_between_two_readings() -> None:
    before = TritonCounts(rows=10, executions=10, requests=10, queued=10, queue_ns=5_000_000)
    after = TritonCounts(rows=30, executions=30, requests=30, queued=30, queue_ns=45_000_000)
    assert queue_wait(before, after) == {"requests": 20, "mean_wait_ms": 2.0}
    assert queue_wait(before, before) is None
    assert queue_wait(None, after) is None
