"""The predicted line of prompts an LLM engine has been sent and not yet prefilled.

The engine works through the prompts it was dispatched in about that order, so the scheduler
predicts when the line ends (``until_s``) from the capacity profile's prefill speed, and each
prompt's first token at the line's end when it joined. Two observations correct the prediction,
because the profile's speed is not what a busy engine reaches (it also decodes many sequences in
every iteration, waits for a free slot, or runs on a host slower than its profile):

- A first token (``first_token``): the prompts behind it are late (or early) by as much as it
  was, so the line's end moves by that error.
- A first token that is overdue (``backlog_s``, ``join``): while the earliest-predicted prompt
  still waiting for its first token is past its prediction, every prompt behind it is late by at
  least as much. Without this the line would be corrected only once that first token arrives, and
  a line of prompts admitted behind a slow one would all be predicted in time until then.

Corrections accumulate in ``shift_s``; each waiting prompt keeps its prediction net of the shift at
its dispatch, so no correction is counted twice. A first token also measures what the engine spent
on its prompt, the sample that ``prefill_cost`` learns the engine's speed from. Written by hand: it
is a few lines of arithmetic over the scheduler's own dispatch records, which no queueing library
models.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field


@dataclass(frozen=True, slots=True)
class _Awaited:
    predicted_net_s: float  # predicted first token - shift at its dispatch
    joined_s: float
    work_tokens: float
    joined_busy: bool  # other prompts of the line were still awaited when it joined


@dataclass(frozen=True)
class PrefillSample:
    """What the engine spent on one prompt of a busy line: ``seconds`` for ``work_tokens``."""

    work_tokens: float
    seconds: float


@dataclass
class PrefillLine:
    """One engine's line for one model (times in seconds on the driver's clock)."""

    until_s: float = 0.0  # when the prompts dispatched so far should all be prefilled
    shift_s: float = 0.0  # total correction applied from observed and overdue first tokens
    last_first_token_s: float = 0.0
    _awaiting: dict[str, _Awaited] = field(default_factory=dict)
    _earliest: list[tuple[float, str]] = field(default_factory=list)  # heap over _awaiting (lazy deletion)

    def join(self, request_id: str, prefill_s: float, now: float, work_tokens: float = 0.0) -> float:
        """A prompt of ``work_tokens`` predicted to take ``prefill_s`` joins the end of the line;
        returns when its first token is predicted. An overdue first token lengthens the line first."""
        self._catch_up(now)
        busy = bool(self._awaiting)
        self.until_s = max(now, self.until_s) + prefill_s
        net_s = self.until_s - self.shift_s
        self._awaiting[request_id] = _Awaited(net_s, now, work_tokens, busy)
        heapq.heappush(self._earliest, (net_s, request_id))
        return self.until_s

    def first_token(self, request_id: str, now: float) -> PrefillSample | None:
        """The prompt gave its first token at ``now``: the line's end moves by its error (never
        before ``now``). Returns the engine's time for the prompt when it joined a busy line (the
        time since the line's previous first token, or since it joined if later), else None.
        Unknown ids (not LLM prompts, or already seen) are ignored."""
        awaited = self._awaiting.pop(request_id, None)
        if awaited is None:
            return None
        error_s = now - (awaited.predicted_net_s + self.shift_s)
        self.shift_s += error_s
        self.until_s = max(now, self.until_s + error_s)
        started_s, self.last_first_token_s = max(awaited.joined_s, self.last_first_token_s), now
        if not awaited.joined_busy:
            return None
        return PrefillSample(awaited.work_tokens, max(0.0, now - started_s))

    def leave(self, request_id: str, now: float, engine_idle: bool) -> None:
        """The request ended (with or without a first token); ``engine_idle``: nothing of this
        model is left in flight on the worker, so nothing is left in its line either."""
        self._awaiting.pop(request_id, None)
        if engine_idle:
            self.until_s = min(self.until_s, now)
            self._awaiting.clear()
            self._earliest.clear()

    def overdue_s(self, now: float) -> float:
        """How far ``now`` is past the earliest predicted first token not yet seen (0 if none)."""
        while self._earliest and self._net_s(self._earliest[0][1]) != self._earliest[0][0]:
            heapq.heappop(self._earliest)  # seen, ended, or joined again since
        if not self._earliest:
            return 0.0
        return max(0.0, now - (self._earliest[0][0] + self.shift_s))

    def backlog_s(self, now: float) -> float:
        """Predicted seconds before a prompt dispatched now starts its prefill (the prompts ahead),
        including the lateness of an overdue first token."""
        return max(0.0, self.until_s + self.overdue_s(now) - now)

    def _net_s(self, request_id: str) -> float | None:
        awaited = self._awaiting.get(request_id)
        return awaited.predicted_net_s if awaited is not None else None

    def _catch_up(self, now: float) -> None:
        overdue_s = self.overdue_s(now)
        if overdue_s > 0:
            self.shift_s += overdue_s
            self.until_s += overdue_s
