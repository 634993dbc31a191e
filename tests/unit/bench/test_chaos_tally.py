"""The chaos benchmark's accounting: one outcome per request, and the targets it is judged by."""

import httpx

from bench.chaos import _outcome
from bench.chaos_tally import Ending, Tally, targets


def _tally(endings: list[Ending], extra_started: int = 0) -> Tally:
    tally = Tally()
    for ending in endings:
        tally.start(ending.kind)
    for _ in range(extra_started):
        tally.start("embeddings")
    for ending in endings:
        tally.end(ending)
    return tally


def test_a_clean_run_meets_every_target() -> None:
    endings = [Ending("chat_stream", "completed", 2.0, identical=True, reconnects=1)] * 3 + \
              [Ending("embeddings", "completed", 0.1, reconnects=1)] * 200
    report = _tally(endings).report()
    assert report["outcomes"] == {"chat_stream": {"completed": 3}, "embeddings": {"completed": 200}}
    assert (report["stream_reconnects"], report["resends"]) == (3, 200)
    assert all(targets(report).values())


def test_a_request_that_never_ended_a_changed_stream_or_a_late_answer_miss_their_targets() -> None:
    endings = [Ending("chat_stream", "completed", 2.0, identical=False),
               Ending("embeddings", "failed(worker_failed)", 25.1, late=True)]
    checked = targets(_tally(endings, extra_started=1).report())
    assert checked == {"each_request_one_outcome": False, "non_streamed_success_99": False,
                       "streams_completed_99": True, "greedy_identical": False, "none_late": False}


def test_answers_map_to_outcomes_by_status_and_code() -> None:
    def answer(status: int, code: str) -> httpx.Response:
        return httpx.Response(status, json={"error": {"code": code}})

    assert _outcome(httpx.Response(200, json={})) == "completed"
    assert _outcome(answer(503, "worker_failed")) == "failed(worker_failed)"
    assert _outcome(answer(503, "no_worker")) == "rejected(no_worker)"
    assert _outcome(answer(429, "tier_shed")) == "rejected(tier_shed)"
    assert _outcome(answer(504, "deadline_exceeded")) == "expired"
    assert _outcome(answer(502, "worker_error")) == "failed(worker_error)"
