"""What a prompt costs one LLM engine, learned from the first tokens it returns.

The capacity profile gives the prior: a prompt's work (the tokens the engine must compute, plus
one per sequence it decodes meanwhile) at ``prefill_tokens_per_s``. What an engine reaches is
another speed: a host slower than its profile, a busy engine that decodes many sequences in every
iteration, a per-prompt cost (a step's fixed time, a prefix copy) that a speed alone cannot hold.
Predicted at the profile's speed, admission, TTFT expiry and the prefill line bound are all
optimistic by as much, and each prompt's line correction (``prefill_line``) comes too late for
the prompts already admitted.

So each worker learns, per model, ``seconds = overhead_s + s_per_token x work_tokens`` from its
busy line: when a prompt's first token comes while the prompt joined a line that was still
working on others, the time since the line's previous first token (or since the prompt joined, if
later) is what the engine spent on it. A prompt that joined an idle line gives no sample: its
time also holds the path to the engine and back, which the line does not repeat per prompt.

The fit is least squares over the samples, each weighted down by ``forgetting`` per newer one,
with a ridge prior of ``prior_weight`` samples that pulls the overhead to 0 and the per-token time
to the profile's, the latter measured over ``reference_tokens``. Without contrast in prompt length
the samples fix the cost at the lengths seen and the prior splits what the profile does not
explain: prompts much shorter than ``reference_tokens`` that take long are taken to show a fixed
cost (cached prompts), much longer ones a slower speed (a slow host), half and half at that
length. The per-token time is kept within ``max_ratio`` of the profile's, so that a stalled engine
or a broken profile cannot make a worker look free or useless. Written by hand: a 2 x 2 weighted
least-squares update, which no library does online in fewer lines.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class PrefillCoefficients:
    """One engine's learned prompt cost: seconds = ``overhead_s + s_per_token x work tokens``."""

    overhead_s: float
    s_per_token: float

    def seconds(self, work_tokens: float) -> float:
        return self.overhead_s + self.s_per_token * work_tokens

    @property
    def tokens_per_s(self) -> float:
        """The marginal prefill speed (tokens the engine adds per second of a longer prompt)."""
        return 1.0 / self.s_per_token


@dataclass
class PrefillCost:
    """Exponentially weighted sums of the samples (work tokens ``w``, seconds ``d``) of one engine."""

    forgetting: float = 0.97
    prior_weight: float = 1.0
    reference_tokens: float = 256.0
    max_ratio: float = 4.0
    _n: float = 0.0
    _w: float = 0.0
    _d: float = 0.0
    _ww: float = 0.0
    _wd: float = 0.0
    _fit: tuple[float, PrefillCoefficients] | None = None  # (prior tokens/s, its fit) until the next sample

    def observe(self, work_tokens: float, seconds: float) -> None:
        """The engine spent ``seconds`` on a prompt of ``work_tokens`` (both >= 0)."""
        f = self.forgetting
        self._n = f * self._n + 1.0
        self._w = f * self._w + work_tokens
        self._d = f * self._d + seconds
        self._ww = f * self._ww + work_tokens * work_tokens
        self._wd = f * self._wd + work_tokens * seconds
        self._fit = None

    def coefficients(self, prior_tokens_per_s: float) -> PrefillCoefficients:
        """The fit, around the profile's speed ``prior_tokens_per_s`` (> 0)."""
        if self._fit is not None and self._fit[0] == prior_tokens_per_s:
            return self._fit[1]
        fit = self._solve(1.0 / prior_tokens_per_s)
        self._fit = (prior_tokens_per_s, fit)
        return fit

    def _solve(self, prior_s_per_token: float) -> PrefillCoefficients:
        if self._n <= 0:
            return PrefillCoefficients(0.0, prior_s_per_token)
        k = self.prior_weight
        k_b = k * self.reference_tokens ** 2
        # Normal equations: (n + k) a + w b = d;  w a + (ww + k_b) b = wd + k_b b0.
        a11, a12, a22 = self._n + k, self._w, self._ww + k_b
        r1, r2 = self._d, self._wd + k_b * prior_s_per_token
        det = a11 * a22 - a12 * a12
        if det <= 0:
            return PrefillCoefficients(0.0, prior_s_per_token)
        overhead_s, s_per_token = (r1 * a22 - a12 * r2) / det, (a11 * r2 - a12 * r1) / det
        if overhead_s < 0:  # no negative fixed cost: refit through the origin
            s_per_token = r2 / a22
        low, high = prior_s_per_token / self.max_ratio, prior_s_per_token * self.max_ratio
        s_per_token = min(high, max(low, s_per_token))
        return PrefillCoefficients(max(0.0, (r1 - a12 * s_per_token) / a11), s_per_token)
