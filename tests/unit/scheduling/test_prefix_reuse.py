"""Prefix reuse: prompts that share a prefix a free engine slot holds are predicted to prefill only
the rest, in the line, the start wait and admission (``scheduling.prefix_reuse``)."""

from __future__ import annotations

from dataclasses import replace

from scheduling.capacity import CapacityProfile
from scheduling.outcomes import Admitted, Rejected, RejectReason
from scheduling.prefix_reuse import PrefixMemory, PromptPrefixes
from scheduling.requests import Request
from scheduling.scheduler import Scheduler, SchedulerConfig, build_scheduler
from scheduling.tenants import Tier
from scheduling.workers import prefill_backlog_s
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


def test_a_free_slot_holding_a_shared_prefix_lends_it_never_the_whole_prompt() -> None:
    memory = PrefixMemory()
    first, second = PromptPrefixes.of(_prompt(1)), PromptPrefixes.of(_prompt(2))
    assert memory.reusable_tokens(second, 1020) == 0
    memory.release(first, free_slots=16)
    assert memory.reusable_tokens(second, 1020) == 992  # 62 whole shared blocks
    assert memory.reusable_tokens(first, 1020) == 1008  # all its 63 blocks ...
    assert memory.reusable_tokens(PromptPrefixes.of(SYSTEM[:32]), 32) == 31  # ... but never its last token
    assert memory.reusable_tokens(None, 1020) == 0


def test_a_dispatched_prompt_takes_the_slot_it_reuses_and_slots_are_forgotten_oldest_first() -> None:
    memory = PrefixMemory()
    memory.release(PromptPrefixes.of(_prompt(1)), free_slots=16)
    memory.take(PromptPrefixes.of(_prompt(2)), free_slots=15)  # runs in the slot that held prompt 1
    assert memory.chains == [] and memory.reusable_tokens(PromptPrefixes.of(_prompt(3)), 1020) == 0
    other = PromptPrefixes.of([7] * 64)
    memory.release(other, free_slots=2)
    memory.release(PromptPrefixes.of(_prompt(4)), free_slots=2)
    memory.release(PromptPrefixes.of(_prompt(5)), free_slots=2)  # two free slots: the oldest goes
    assert memory.reusable_tokens(other, 64) == 0 and memory.reusable_tokens(PromptPrefixes.of(_prompt(6)), 1020) == 992
    memory.take(PromptPrefixes.of([9] * 64), free_slots=0)  # no match, and no free slot is left holding anything
    assert memory.chains == []


def _scheduler(reuse: bool) -> Scheduler:
    limits = {**LIMITS, "chat": replace(LIMITS["chat"], prefix_reuse=reuse)}
    scheduler = build_scheduler(SchedulerConfig(), limits)
    scheduler.update_workers([view("cpu", CPU, "eu")])
    return scheduler


def _burst_after_four_served(reuse: bool) -> tuple[list[Admitted | Rejected], list[float]]:
    """Four requests served together and finished (four free slots now hold the system prompt),
    then six that share it, one after another at once: their admissions, and the predicted prefill
    line after each dispatch."""
    scheduler = _scheduler(reuse)
    warm = [replace(_chat(q), ttft_slo_s=None) for q in range(4)]
    for r in warm:
        assert isinstance(scheduler.submit(r, now=0.0), Admitted)
    assert len(scheduler.schedule(now=0.0).dispatches) == 4
    for r in warm:
        scheduler.complete(r.request_id, now=20.0, generated_tokens=16)
    admissions, lines = [], []
    for question in range(4, 10):
        admissions.append(scheduler.submit(_chat(question, now=20.0), now=20.0))
        scheduler.schedule(now=20.0)
        lines.append(prefill_backlog_s(scheduler.loads["cpu"].model("chat"), 20.0))
    return admissions, lines


def test_with_reuse_prompts_that_find_their_prefix_in_a_free_slot_are_predicted_by_their_questions() -> None:
    admissions, lines = _burst_after_four_served(reuse=True)
    assert [isinstance(a, Admitted) for a in admissions] == [True] * 5 + [False], admissions
    assert lines[3] < 4 * (28 + 5) / 320  # four questions: 28 tokens each past the 992 reused
    # The fifth finds no free slot holding the prompt (the engine would prefill it in full, as
    # predicted); the sixth would then wait past premium's 4 s.
    assert lines[4] > lines[3] + 1020 / 320
    assert admissions[5].reason is RejectReason.PREDICTED_SLO_MISS  # type: ignore[union-attr]


def test_without_reuse_the_same_burst_is_refused_after_its_first_prompt() -> None:
    admissions, _ = _burst_after_four_served(reuse=False)
    assert isinstance(admissions[0], Admitted)  # 1,020 tokens at 320/s: 3.2 s, within 4 s alone
    assert all(isinstance(a, Rejected) and a.reason is RejectReason.PREDICTED_SLO_MISS for a in admissions[1:])
