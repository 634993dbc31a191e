"""A day whose request mix drifts: short chat in the morning, long-context, long-output work
(ShareGPT-like conversations and batch jobs) in the evening and at night.

The diurnal curve (``diurnal.RateCurve``) is read as *work*, in chat-request equivalents per
second: the 10x swing and the spike are swings of the GPU work arriving. Each request is a chat
request of the Azure conversation trace, or, with probability ``long_share(t)`` at its arrival
time, a request with the lengths of a ShareGPT conversation (drawn with the run's seed). The
request rate is therefore ``work(t) / (1 + long_share(t) x (work_ratio - 1))``, where
``work_ratio`` is the mean work of a long request over a chat one (one replica's seconds, from
its capacity profile). So the token work follows the curve while the request count does not:
a request-rate autoscaler sees fewer requests in the evening for the same work.

``long_share`` is a raised cosine over the day: ``low`` at ``chat_at`` of the day (mid-morning)
and ``high`` half a day later (evening).
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, replace

from scheduling.capacity import CapacityProfile
from simulator.diurnal import RateCurve
from simulator.workloads import TraceItem


@dataclass(frozen=True)
class MixDrift:
    """The share of long requests over the day (``low`` at ``chat_at``, ``high`` half a day later)."""

    low: float = 0.05
    high: float = 0.6
    chat_at: float = 0.375  # 09:00

    def __post_init__(self) -> None:
        if not 0 <= self.low <= self.high <= 1 or not 0 <= self.chat_at < 1:
            raise ValueError("need 0 <= low <= high <= 1 and chat_at in [0, 1)")

    def long_share(self, day_fraction: float) -> float:
        phase = 2.0 * math.pi * (day_fraction - self.chat_at)
        return self.low + (self.high - self.low) * (1.0 - math.cos(phase)) / 2.0


def work_s(prompt_tokens: float, output_tokens: float, profile: CapacityProfile) -> float:
    """Seconds of one replica's saturated work for a request of these lengths (the profile's speeds)."""
    return prompt_tokens / profile.prefill_tokens_per_s + output_tokens / profile.decode_tokens_per_s


def mean_work_s(lengths: Sequence[tuple[int, int]], profile: CapacityProfile) -> float:
    return sum(work_s(p, o, profile) for p, o in lengths) / len(lengths)


@dataclass(frozen=True)
class DriftingCurve:
    """The request rate of a day whose work follows ``work`` (chat-request equivalents per
    second) while the mix drifts (``drift``; a long request is ``work_ratio`` chat requests).
    It has the attributes ``diurnal.cumulative`` and ``warp`` read."""

    work: RateCurve
    drift: MixDrift
    work_ratio: float

    @property
    def day_s(self) -> float:
        return self.work.day_s

    @property
    def spike_start_s(self) -> float:
        return self.work.spike_start_s

    @property
    def spike_end_s(self) -> float:
        return self.work.spike_end_s

    def long_share(self, t_s: float) -> float:
        return self.drift.long_share(t_s / self.work.day_s)

    def rps(self, t_s: float) -> float:
        return self.work.rps(t_s) / (1.0 + self.long_share(t_s) * (self.work_ratio - 1.0))


def drift_lengths(items: Sequence[TraceItem], curve: DriftingCurve, long_lengths: Sequence[tuple[int, int]],
                  rng: random.Random, max_context_tokens: int) -> list[TraceItem]:
    """``items`` (already warped onto ``curve``) with each one's lengths replaced, with probability
    ``long_share`` at its arrival, by a long request's lengths (those that fit the context)."""
    fitting = [(p, o) for p, o in long_lengths if p + o <= max_context_tokens]
    out = []
    for item in items:
        if rng.random() < curve.long_share(item.arrival_s):
            prompt, output = fitting[rng.randrange(len(fitting))]
            item = replace(item, prompt_tokens=prompt, output_tokens=output)
        out.append(item)
    return out
