"""Prefix reuse: prompts that share a prefix an engine's slots hold are predicted to prefill only
the rest, in the line, the start wait, admission and placement (``scheduling.prediction.prefix_reuse``)."""

from __future__ import annotations

from dataclasses import replace

from scheduling.capacity import CapacityProfile
from scheduling.outcomes import Admitted, Rejected, RejectReason
from scheduling.prediction.latency import prefill_backlog_s, uncached_prompt_tokens
from scheduling.prediction.prefix_reuse import PrefixMemory, PromptPrefixes
from scheduling.requests import Request
from scheduling.scheduler import Scheduler, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from tests.unit.scheduling.factories import LIMITS, request, tenant, view

SYSTEM = list(range(1000))  # a 1,000-token system prompt every request shares
CPU = CapacityProfile("cpu", memory_gib=8, max_batch_tokens=8192, max_context_tokens=4096,
                      prefill_tokens_per_s=320, decode_tokens_per_s=120, cost_per_hour=0.1, max_sequences=16)


def _prompt(question: int) -> list[int]:
    return SYSTEM + [10_000 + 20 * question + i for i in range(20)]


def _chat(question: int, now: float = 0.0) -> Request:
    tokens = _prompt(question)
    base = request(tenant("p", tier=Tier.PREMIUM), now=now, prefill=len(tokens), output=16, slo_s=4.0)
    return replace(base, prefixes=PromptPrefixes.of(tokens))


def test_prompts_share_the_hashes_of_the_blocks_they_share_and_only_whole_blocks_are_hashed() -> None:
    a, b = PromptPrefixes.of(_prompt(1)), PromptPrefixes.of(_prompt(2))
    assert len(a.hashes) == 1020 // 16 == 63
    shared = next(i for i, (x, y) in enumerate(zip(a.hashes, b.hashes, strict=True)) if x != y)
    assert shared == 1000 // 16  # block 62 holds tokens 992..1007: the first that differs
    assert PromptPrefixes.of(SYSTEM[:15]).hashes == ()


def test_a_slot_holding_a_shared_prefix_lends_it_never_the_whole_prompt() -> None:
    memory = PrefixMemory()
    first, second = PromptPrefixes.of(_prompt(1)), PromptPrefixes.of(_prompt(2))
    assert memory.reusable_tokens(second, 1020) == 0
    memory.remember(first, slots=16)
    assert memory.reusable_tokens(second, 1020) == 992  # 62 whole shared blocks
    assert memory.reusable_tokens(first, 1020) == 1008  # all its 63 blocks ...
    assert memory.reusable_tokens(PromptPrefixes.of(SYSTEM[:32]), 32) == 31  # ... but never its last token
    assert memory.reusable_tokens(None, 1020) == 0


def test_only_the_last_prompts_one_per_slot_stay_held() -> None:
    memory = PrefixMemory()
    other = PromptPrefixes.of([7] * 64)
    memory.remember(other, slots=2)
    memory.remember(PromptPrefixes.of(_prompt(4)), slots=2)
    assert memory.reusable_tokens(other, 64) == 63
    memory.remember(PromptPrefixes.of(_prompt(5)), slots=2)  # two slots: the oldest prompt is gone
    assert memory.reusable_tokens(other, 64) == 0
    assert memory.reusable_tokens(PromptPrefixes.of(_prompt(6)), 1020) == 992
    memory.remember(None, slots=0)
    assert not memory.chains


def _scheduler(reuse: bool) -> Scheduler:
    limits = {**LIMITS, "chat": replace(LIMITS["chat"], prefix_reuse=reuse)}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("cpu", CPU, "eu")])
    return scheduler


def _burst_after_one_served(reuse: bool) -> tuple[list[Admitted | Rejected], list[float]]:
    """One request served and finished, then eight that share its system prompt, one after
    another at once: their admissions, and the predicted prefill line after each dispatch."""
    scheduler = _scheduler(reuse)
    first = _chat(0)
    assert isinstance(scheduler.submit(first, now=0.0), Admitted)
    scheduler.schedule(now=0.0)
    scheduler.complete(first.request_id, now=5.0, generated_tokens=16)
    admissions, lines = [], []
    for question in range(1, 9):
        admissions.append(scheduler.submit(_chat(question, now=5.0), now=5.0))
        scheduler.schedule(now=5.0)
        lines.append(prefill_backlog_s(scheduler.loads["cpu"].model("chat"), 5.0))
    return admissions, lines


def test_with_reuse_a_burst_sharing_a_system_prompt_is_predicted_by_its_questions_and_admitted() -> None:
    admissions, lines = _burst_after_one_served(reuse=True)
    assert all(isinstance(a, Admitted) for a in admissions), admissions
    # Each computes its 28 tokens past the 992 held (the engine copies a running one's prefix),
    # plus one per sequence in flight. Seven fit the KV budget (7 x 1,036 of 8,192 tokens): the
    # line is 7 x 29 + (1 + ... + 6) = 224 tokens at 320/s; the eighth waits in the queue.
    assert abs(lines[6] - 224 / 320) < 1e-9 and lines[7] == lines[6]


def test_without_reuse_the_same_burst_is_refused_after_its_first_prompt() -> None:
    admissions, _ = _burst_after_one_served(reuse=False)
    assert isinstance(admissions[0], Admitted)  # 1,020 tokens at 320/s: 3.2 s, within 4 s alone
    assert all(isinstance(a, Rejected) and a.reason is RejectReason.PREDICTED_SLO_MISS for a in admissions[1:])


def test_a_prompt_goes_to_the_worker_whose_slots_hold_its_prefix() -> None:
    scheduler = _scheduler(reuse=True)
    scheduler.update_workers([view("cpu-a", CPU, "eu"), view("cpu-b", CPU, "eu")])
    served = _chat(0)
    scheduler.submit(served, now=0.0)
    holder = scheduler.schedule(now=0.0).dispatches[0].worker_id
    scheduler.complete(served.request_id, now=5.0, generated_tokens=16)
    for question in range(1, 4):
        follow = _chat(question, now=5.0 * question)
        scheduler.submit(follow, now=5.0 * question)
        assert scheduler.schedule(now=5.0 * question).dispatches[0].worker_id == holder
        scheduler.complete(follow.request_id, now=5.0 * question + 1.0, generated_tokens=16)


def test_versions_loaded_side_by_side_hold_prefixes_of_their_own() -> None:
    scheduler = _scheduler(reuse=True)
    served = replace(_chat(0), model_version=1)
    scheduler.submit(served, now=0.0)
    scheduler.schedule(now=0.0)
    scheduler.complete(served.request_id, now=5.0, generated_tokens=16)
    endpoint = scheduler.endpoints("chat", 5.0)[0]
    same, other = replace(_chat(1, now=5.0), model_version=1), replace(_chat(1, now=5.0), model_version=2)
    assert uncached_prompt_tokens(same, endpoint) == 28 and uncached_prompt_tokens(other, endpoint) == 1020
