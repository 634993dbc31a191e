"""The scheduler's plans, with sequences that never touch a model."""

from __future__ import annotations

from python_backends.chat.block_pool import BlockPool
from python_backends.chat.engine import ListSink
from python_backends.chat.params import GenerationParams
from python_backends.chat.scheduler import SchedulerLimits, StepPlan, StepScheduler
from python_backends.chat.sequence import Sequence

_numbers = iter(range(1, 10_000))


def _seq(prompt: int, priority: int = 0) -> Sequence:
    return Sequence(number=next(_numbers), prompt_tokens=prompt, max_new_tokens=100, priority=priority,
                    params=GenerationParams(max_tokens=100), sink=ListSink(), tokens=[1] * prompt)


def _run(plan: StepPlan) -> None:
    """Pretend the model ran the plan and sampled token 2 for each finished input."""
    for chunk in plan.chunks:
        chunk.seq.computed += chunk.count
        if chunk.wants_logits:
            chunk.seq.tokens.append(2)


def _scheduler(blocks: int = 64, running: int = 4, batch: int = 32, prefill: int = 32) -> StepScheduler:
    return StepScheduler(BlockPool(blocks, 4), SchedulerLimits(running, batch, prefill))


def test_long_prompt_is_prefilled_in_chunks_while_others_decode() -> None:
    scheduler = _scheduler(prefill=8)
    short = _seq(4)
    scheduler.add(short)
    _run(scheduler.schedule())
    long = _seq(30)
    scheduler.add(long)
    sizes = []
    for _ in range(4):
        plan = scheduler.schedule()
        assert any(c.seq is short and c.decode for c in plan.chunks)  # decode never waits
        sizes.append(next(c.count for c in plan.chunks if c.seq is long))
        _run(plan)
    assert sizes == [8, 8, 8, 6]
    assert long.decoding


def test_admission_waits_for_blocks_of_the_whole_prompt() -> None:
    scheduler = _scheduler(blocks=4)
    first, second = _seq(12), _seq(8)
    scheduler.add(first)
    scheduler.add(second)
    plan = scheduler.schedule()
    assert [c.seq for c in plan.chunks] == [first]
    assert scheduler.waiting == [second]
    assert scheduler.finish(first) is not None
    assert [c.seq for c in scheduler.schedule().chunks] == [second]


def test_exhaustion_preempts_lowest_priority_most_recent_and_requeues_it() -> None:
    scheduler = _scheduler(blocks=3)
    high, low_old, low_new = _seq(4, priority=2), _seq(4, priority=1), _seq(4, priority=1)
    for seq in (high, low_old, low_new):
        scheduler.add(seq)
    _run(scheduler.schedule())  # all three admitted, one block each, each sampled a token
    plan = scheduler.schedule()  # each needs a second block: the pool has none
    assert plan.preempted[0] is low_new
    assert low_new.computed == 0 and low_new.slot is None
    assert low_new in scheduler.waiting
    assert low_new not in [c.seq for c in plan.chunks]
    assert scheduler.preemptions_total >= 1
    assert high in [c.seq for c in plan.chunks]


def test_waiting_order_is_priority_then_arrival() -> None:
    scheduler = _scheduler(running=1)
    a, b, c = _seq(4, priority=1), _seq(4, priority=3), _seq(4, priority=3)
    for seq in (a, b, c):
        scheduler.add(seq)
    assert scheduler.waiting == [b, c, a]


def _tokens_seq(tokens: list[int]) -> Sequence:
    return Sequence(number=next(_numbers), prompt_tokens=len(tokens), max_new_tokens=100, priority=0,
                    params=GenerationParams(max_tokens=100), sink=ListSink(), tokens=list(tokens))


def test_a_sequence_is_admitted_into_the_slot_holding_its_longest_prefix() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 32), prefix_cache=True)
    system = [7, 7, 7, 7, 7, 7]
    first, other = _tokens_seq([*system, 1, 2]), _tokens_seq([9, 9, 9])
    scheduler.add(first)
    scheduler.add(other)
    _run(scheduler.schedule())
    first_slot = first.slot
    assert scheduler.finish(first) is None  # cells kept for reuse, not cleared
    assert scheduler.finish(other) is None
    follower = _tokens_seq([*system, 3, 4, 5])
    scheduler.add(follower)
    plan = scheduler.schedule()
    assert follower.slot == first_slot
    assert plan.chunks[0].start == len(system) and plan.chunks[0].count == 3
    assert plan.trims == ((first_slot, len(system)),)  # its cells past the shared prefix go
    assert scheduler.prefix_hit_tokens_total == len(system)


def test_an_identical_prompt_still_feeds_its_last_token_for_its_logits() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(2, 32, 32), prefix_cache=True)
    first = _tokens_seq([5, 6, 7, 8])
    scheduler.add(first)
    plan = scheduler.schedule()
    for chunk in plan.chunks:
        chunk.seq.computed += chunk.count  # prefill done, nothing sampled yet
    scheduler.finish(first)
    again = _tokens_seq([5, 6, 7, 8])
    scheduler.add(again)
    plan = scheduler.schedule()
    assert (plan.chunks[0].start, plan.chunks[0].count) == (3, 1) and plan.chunks[0].wants_logits
    assert plan.trims == ((again.slot, 3),)  # the last cell is computed again


def test_a_preempted_slot_is_cleared_and_not_reused_as_a_prefix() -> None:
    scheduler = StepScheduler(BlockPool(3, 4), SchedulerLimits(2, 32, 32), prefix_cache=True)
    low, high = _tokens_seq([1] * 4), _tokens_seq([1] * 4)
    high.priority = 5
    scheduler.add(low)
    scheduler.add(high)
    _run(scheduler.schedule())  # 2 blocks used of 3; each needs a second block to grow past 4 tokens
    plan = scheduler.schedule()
    assert plan.preempted == (low,) and plan.released_slots
    assert low.slot is None and scheduler.prefix_hit_tokens_total == 0


def test_a_one_token_prompt_gets_a_slot_with_or_without_cached_prefixes() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(2, 32, 32), prefix_cache=True)
    single = _tokens_seq([42])
    scheduler.add(single)
    plan = scheduler.schedule()
    assert single.slot is not None and (plan.chunks[0].start, plan.chunks[0].count) == (0, 1)


def test_a_short_new_prompt_is_prefilled_in_a_step_of_its_own_then_decodes_resume() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 16), short_prefill_first=True)
    running = _seq(4)
    scheduler.add(running)
    _run(scheduler.schedule())
    assert running.decoding
    newcomer = _seq(10)
    scheduler.add(newcomer)
    alone = scheduler.schedule()
    assert [(c.seq, c.decode) for c in alone.chunks] == [(newcomer, False)] and alone.chunks[0].wants_logits
    _run(alone)
    second = _seq(6)
    scheduler.add(second)
    mixed = scheduler.schedule()  # never two prefill-only steps in a row: the decodes run now
    assert {c.seq for c in mixed.chunks if c.decode} == {running, newcomer}
    assert any(c.seq is second for c in mixed.chunks)


def test_a_prompt_longer_than_the_prefill_budget_takes_the_mixed_chunked_path() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 8), short_prefill_first=True)
    running = _seq(4)
    scheduler.add(running)
    _run(scheduler.schedule())
    long = _seq(30)
    scheduler.add(long)
    plan = scheduler.schedule()
    assert any(c.seq is running and c.decode for c in plan.chunks)
    assert next(c.count for c in plan.chunks if c.seq is long) == 8


def test_new_sequences_take_the_lowest_free_slots_so_the_batch_spans_few_kv_streams() -> None:
    # llama.cpp attends over every stream between the batch's lowest and highest slot: after all
    # four slots held the same prompt, two new ones go to slots 0 and 1, not the last freed.
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 32), prefix_cache=True)
    prompt = [7] * 8
    first = [_tokens_seq(prompt) for _ in range(4)]
    for seq in first:
        scheduler.add(seq)
    _run(scheduler.schedule())
    assert sorted(s.slot for s in first if s.slot is not None) == [0, 1, 2, 3]
    for seq in sorted(first, key=lambda s: s.slot or 0):  # slot 3 is freed last
        scheduler.finish(seq)
    second = [_tokens_seq(prompt) for _ in range(2)]
    for seq in second:
        scheduler.add(seq)
    scheduler.schedule()
    assert sorted(s.slot for s in second if s.slot is not None) == [0, 1]
    assert scheduler.prefix_hit_tokens_total == 2 * (len(prompt) - 1)


def test_a_running_sequences_computed_prefix_is_copied_into_an_empty_slot_for_a_newcomer() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 32), prefix_cache=True)
    system = list(range(100, 112))
    first = _tokens_seq([*system, 1, 2])
    scheduler.add(first)
    _run(scheduler.schedule())  # prefilled; it decodes on, its slot busy
    follower = _tokens_seq([*system, 3, 4, 5])
    scheduler.add(follower)
    plan = scheduler.schedule()
    assert follower.slot is not None and follower.slot != first.slot
    assert plan.copies == ((first.slot, follower.slot, len(system)),) and plan.trims == ()
    assert next((c.start, c.count) for c in plan.chunks if c.seq is follower) == (len(system), 3)
    assert scheduler.prefix_hit_tokens_total == len(system)


def test_only_what_the_running_sequence_has_computed_is_copied() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 8), prefix_cache=True)
    system = list(range(100, 120))
    first = _tokens_seq([*system, 1])
    scheduler.add(first)
    _run(scheduler.schedule())  # 8 of its 21 prompt tokens (the step's prefill budget)
    follower = _tokens_seq([*system, 2])
    scheduler.add(follower)
    _run(scheduler.schedule())  # the first's next 8 take the whole budget: no admission
    assert first.computed == 16 and follower.slot is None
    plan = scheduler.schedule()  # the first's last 5, and 3 tokens of room for the follower
    assert plan.copies == ((first.slot, follower.slot, 16),)  # 16 of the 20 shared: what is computed
    assert next((c.start, c.count) for c in plan.chunks if c.seq is follower) == (16, 3)


def test_a_free_slot_holding_the_prefix_is_reused_in_place_rather_than_copied() -> None:
    scheduler = StepScheduler(BlockPool(64, 4), SchedulerLimits(4, 32, 32), prefix_cache=True)
    system = list(range(100, 112))
    done, running = _tokens_seq([*system, 1]), _tokens_seq([*system, 2])
    scheduler.add(done)
    scheduler.add(running)
    _run(scheduler.schedule())
    freed = done.slot
    scheduler.finish(done)
    follower = _tokens_seq([*system, 3])
    scheduler.add(follower)
    plan = scheduler.schedule()
    assert follower.slot == freed and plan.copies == () and plan.trims == ((freed, len(system)),)
