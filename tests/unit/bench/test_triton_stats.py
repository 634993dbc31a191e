import asyncio
import http.server
import threading

from bench.triton_stats import (
    TritonCounts,
    batch_shape,
    engine_busy,
    engine_counter_totals,
    queue_wait,
    sample_engine_counters,
)


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


PAGE = """# HELP shunter_llm_steps_total Model steps run
# TYPE shunter_llm_steps_total counter
shunter_llm_steps_total{instance="0",model="chat"} 10
shunter_llm_steps_total{instance="0",model="chat-v2"} 5
# TYPE shunter_llm_step_seconds_total counter
shunter_llm_step_seconds_total{instance="0",model="chat"} 1.5
# TYPE shunter_llm_prefill_tokens_total counter
shunter_llm_prefill_tokens_total{instance="0",model="chat"} 630
# TYPE shunter_llm_decode_tokens_total counter
shunter_llm_decode_tokens_total{instance="0",model="chat"} 40
# TYPE shunter_llm_attention_positions_total counter
shunter_llm_attention_positions_total{instance="0",model="chat"} 5953
# TYPE shunter_llm_prefix_hit_tokens_total counter
shunter_llm_prefix_hit_tokens_total{instance="0",model="chat"} 0
# TYPE shunter_llm_preemptions_total counter
shunter_llm_preemptions_total{instance="0",model="chat"} 1
# TYPE nv_inference_count counter
nv_inference_count{model="chat",version="1"} 7
"""


def test_engine_counters_are_summed_over_models_and_their_growth_is_the_engines_busy_work() -> None:
    totals = engine_counter_totals(PAGE)
    assert totals is not None and totals["steps"] == 15 and totals["step_s"] == 1.5
    later = {**totals, "steps": 25.0, "step_s": 2.5}
    busy = engine_busy(totals, later)
    assert busy is not None and busy["steps"] == 10 and busy["step_s"] == 1.0 and busy["decode_tokens"] == 0
    assert engine_busy(None, later) is None


def test_a_page_without_the_step_counters_gives_none() -> None:
    assert engine_counter_totals(PAGE.split("# TYPE shunter_llm_step_seconds")[0]) is None


class _Metrics(http.server.BaseHTTPRequestHandler):
    served = 0  # pages served, so the test waits for samples instead of guessing how long they take

    def do_GET(self) -> None:
        type(self).served += 1
        body = PAGE.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def test_the_counters_are_sampled_until_the_run_is_done_and_once_more_then() -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Metrics)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        async def run() -> list[tuple[float, dict[str, float]]]:
            done = asyncio.Event()
            _Metrics.served = 0
            sampler = asyncio.create_task(sample_engine_counters(f"127.0.0.1:{server.server_port}", done, 0.05))
            deadline = asyncio.get_running_loop().time() + 10
            while _Metrics.served < 3 and asyncio.get_running_loop().time() < deadline:  # a busy host is slow
                await asyncio.sleep(0.02)
            done.set()
            return await asyncio.wait_for(sampler, 5)
        samples = asyncio.run(run())
    finally:
        server.shutdown()
        server.server_close()
    assert len(samples) >= 3 and len(samples) == _Metrics.served  # each page sampled, the last after done
    assert [t for t, _ in samples] == sorted(t for t, _ in samples)
    assert all(counters["steps"] == 15 for _, counters in samples)
