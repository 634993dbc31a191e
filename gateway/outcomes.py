"""How a request ended: the core's ``Outcome`` plus a low-cardinality reason, as one value.

Every request ends in exactly one ``Ending``; its ``label`` (``completed``,
``rejected(rate_limited)``, ``failed(worker_failed)``) is what metrics, the request status store
and the canary analysis record, and ``outcome`` alone is the coarse metric label.
"""

from __future__ import annotations

from dataclasses import dataclass

from scheduling.outcomes import Outcome


@dataclass(frozen=True)
class Ending:
    outcome: Outcome
    reason: str | None = None  # the error code, e.g. ``rate_limited``; None for a plain outcome

    @property
    def label(self) -> str:
        return f"{self.outcome.value}({self.reason})" if self.reason else self.outcome.value


COMPLETED = Ending(Outcome.COMPLETED)
CANCELLED = Ending(Outcome.CANCELLED)
INTERNAL_FAILURE = Ending(Outcome.FAILED, "internal_error")
