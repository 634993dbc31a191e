import random
from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from scheduling.outcomes import RejectReason
from scheduling.placement import Endpoint, fair_placement, least_loaded_placement
from scheduling.placement.scorers import CheapPerRequest
from scheduling.tenants import Tier
from scheduling.workers import WorkerLoad, WorkerView
from tests.unit.scheduling.factories import BIG, LIMITS, SMALL, request, tenant, view


def _endpoints(*views: WorkerView) -> list[Endpoint]:
    return [Endpoint(v, WorkerLoad(), LIMITS["chat"], v.profile.decode_tokens_per_s) for v in views]


def test_long_context_requests_go_to_the_big_gpu() -> None:
    placement = fair_placement(random.Random(0))
    chosen = placement.place(request(tenant(tier=Tier.BATCH), prefill=1500, output=200),
                             _endpoints(view("small", SMALL), view("big", BIG)))
    assert chosen is not None and chosen.worker_id == "big"


def test_premium_goes_to_the_big_gpu_and_small_batch_requests_to_the_cheap_one() -> None:
    placement = fair_placement(random.Random(0))
    endpoints = _endpoints(view("small", replace(SMALL, max_sequences=32)), view("big", replace(BIG, max_sequences=32)))
    premium = placement.place(request(tenant(tier=Tier.PREMIUM), prefill=20, output=20, slo_s=1.0), endpoints)
    batch = placement.place(request(tenant(tier=Tier.BATCH), prefill=20, output=20, slo_s=5.0), endpoints)
    assert premium is not None and premium.worker_id == "big"
    assert batch is not None and batch.worker_id == "small"


def test_a_cheap_gpu_whose_prefill_line_would_miss_the_slo_is_not_chosen() -> None:
    placement = fair_placement(random.Random(0))
    busy = WorkerLoad()
    busy.add(request(tenant(), prefill=900, output=20), now=0.0, prefill_s=0.45)  # 0.45 s of prompts ahead
    endpoints = [Endpoint(view("small", SMALL), busy, LIMITS["chat"], 100.0, now_s=0.0),
                 Endpoint(view("big", BIG), WorkerLoad(), LIMITS["chat"], 200.0, now_s=0.0)]
    chosen = placement.place(request(tenant(tier=Tier.BATCH), prefill=200, output=20, slo_s=0.5), endpoints)
    assert chosen is not None and chosen.worker_id == "big"


def test_a_busy_worker_does_not_look_faster_than_an_idle_twin() -> None:
    placement = fair_placement(random.Random(0))
    busy = WorkerLoad()
    busy.add(request(tenant(), prefill=100, output=20), now=0.0, prefill_s=0.05)
    endpoints = [Endpoint(view("busy", BIG), busy, LIMITS["chat"], 900.0, now_s=0.0),  # observed: big batches
                 Endpoint(view("idle", BIG), WorkerLoad(), LIMITS["chat"], 20.0, now_s=0.0)]  # observed: batch of one
    chosen = placement.place(request(tenant(tier=Tier.STANDARD), prefill=100, output=20, slo_s=2.0), endpoints)
    assert chosen is not None and chosen.worker_id == "idle"


def test_feasible_names_the_filter_that_left_nothing() -> None:
    placement = fair_placement(random.Random(0))
    endpoints = _endpoints(view("us", region="us"))
    assert placement.feasible(request(tenant(regions=("eu",))), endpoints) is RejectReason.RESIDENCY
    assert placement.feasible(request(tenant(), prefill=5000), endpoints) is RejectReason.TOO_LARGE
    assert placement.feasible(request(tenant(), model="rerank"), endpoints) is RejectReason.NO_WORKER


def test_an_unhealthy_worker_is_never_chosen() -> None:
    chosen = least_loaded_placement(random.Random(0)).place(
        request(tenant()), _endpoints(view("down", healthy=False), view("up")))
    assert chosen is not None and chosen.worker_id == "up"


@given(st.lists(st.tuples(st.sampled_from(["eu", "us", "ap"]), st.sampled_from([BIG, SMALL])), min_size=1, max_size=6),
       st.sets(st.sampled_from(["eu", "us", "ap"]), max_size=2), st.integers(0, 1000), st.sampled_from(list(Tier)))
def test_placement_never_violates_residency(workers: list[tuple[str, object]], residency: set[str],
                                            prefill: int, tier: Tier) -> None:
    views = [view(f"w{i}", profile, region) for i, (region, profile) in enumerate(workers)]  # type: ignore[arg-type]
    who = tenant(tier=tier, regions=tuple(sorted(residency)))
    for placement in (fair_placement(random.Random(1)), least_loaded_placement(random.Random(1))):
        chosen = placement.place(request(who, prefill=prefill), _endpoints(*views))
        if chosen is not None and residency:
            assert chosen.view.region in residency


def test_identical_workers_share_the_load() -> None:
    placement = fair_placement(random.Random(0))
    endpoints = _endpoints(view("a", BIG), view("b", BIG))
    chosen = []
    for _ in range(8):
        r = request(tenant(tier=Tier.PREMIUM), prefill=100, output=50, slo_s=2.0)
        pick = placement.place(r, endpoints)
        assert pick is not None
        pick.load.add(r, now=0)
        chosen.append(pick.worker_id)
    assert chosen.count("a") == chosen.count("b") == 4, chosen


def test_a_short_request_costs_least_on_the_cheap_gpu_and_a_long_one_on_the_big_gpu() -> None:
    cheap = replace(SMALL, max_context_tokens=8192, max_sequences=64)  # a small KV pool: 2,048 tokens
    big = replace(BIG, max_context_tokens=8192, max_sequences=4)  # 8,192 KV tokens hold 4 long sequences
    endpoints = _endpoints(view("small", cheap), view("big", big))
    short = CheapPerRequest()(request(tenant(), prefill=10, output=10), endpoints)
    long = CheapPerRequest()(request(tenant(), prefill=1500, output=500), endpoints)
    assert short["small"] == 1.0 > short["big"]
    assert long["big"] == 1.0 > long["small"]


def test_with_a_decode_model_prefill_heavy_requests_go_to_cheap_compute_and_long_outputs_to_big_memory() -> None:
    # A small GPU: cheap compute, a slow weight read, a KV pool of 16k tokens; a big one: 4x the
    # price, 2.5x the prefill speed, 4x faster weight reads and a 400k-token pool.
    cheap = replace(SMALL, max_batch_tokens=16_000, max_context_tokens=8192, prefill_tokens_per_s=5000,
                    decode_step_s=0.037, kv_read_s_per_token=3e-7)
    big = replace(BIG, max_batch_tokens=400_000, max_context_tokens=8192, prefill_tokens_per_s=12_500,
                  decode_step_s=0.012, kv_read_s_per_token=9e-8)
    endpoints = _endpoints(view("small", cheap), view("big", big))
    prefill_heavy = CheapPerRequest()(request(tenant(), prefill=3000, output=16), endpoints)
    long_output = CheapPerRequest()(request(tenant(), prefill=1000, output=512), endpoints)
    assert prefill_heavy["small"] == 1.0 > prefill_heavy["big"]
    assert long_output["big"] == 1.0 > long_output["small"]
