"""The scheduler's plans, with sequences that never touch a model."""

from __future__ import annotations

from python_backends.chat.block_pool import BlockPool
from python_backends.chat.engine import ListSink
from python_backends.chat.params import GenerationParams
from python_backends.chat.scheduler import Scheduler, SchedulerLimits, StepPlan
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


def _scheduler(blocks: int = 64, running: int = 4, batch: int = 32, prefill: int = 32) -> Scheduler:
    return Scheduler(BlockPool(blocks, 4), SchedulerLimits(running, batch, prefill))


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
