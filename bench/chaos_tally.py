"""What the chaos benchmark counts: every request's one outcome, and the figures it is judged by.

Each logical request the load sends (retries of a dropped connection and stream reconnects
included in it) ends in exactly one ``Outcome``: ``completed``, or what stopped it
(``failed(<code>)``, ``rejected(<code>)``, ``expired``, ``lost``: the client never got an answer).
``Tally`` keeps them per kind (``chat_stream``, ``embeddings``, ``rerank``, ``tabular``); a greedy
stream also records whether its text was identical to the undisturbed run's, and every request
whether it took longer than its deadline (plus the slack for its own service). ``Tally.report``
gives the counts and the figures the issue asks for; ``targets`` checks them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from typing import Any

STREAM = "chat_stream"
NON_STREAMED = ("embeddings", "rerank", "tabular")
MIN_SUCCESS = 0.99


@dataclass(frozen=True)
class Ending:
    kind: str
    outcome: str  # completed | failed(<code>) | rejected(<code>) | expired | lost
    latency_s: float
    late: bool = False  # took longer than its deadline plus its service slack
    identical: bool | None = None  # greedy streams: the text equals the undisturbed run's
    reconnects: int = 0  # streams: Last-Event-ID reconnects; others: resends after a dropped connection


@dataclass
class Tally:
    started: Counter[str] = field(default_factory=Counter)
    endings: list[Ending] = field(default_factory=list)

    def start(self, kind: str) -> None:
        self.started[kind] += 1

    def end(self, ending: Ending) -> None:
        self.endings.append(ending)

    def by_kind(self) -> dict[str, Counter[str]]:
        counts: dict[str, Counter[str]] = {}
        for ending in self.endings:
            counts.setdefault(ending.kind, Counter())[ending.outcome] += 1
        return counts

    def report(self) -> dict[str, Any]:
        """Counts per kind and outcome, and the judged figures."""
        counts = self.by_kind()
        ended = Counter(e.kind for e in self.endings)
        streams = [e for e in self.endings if e.kind == STREAM]
        others = [e for e in self.endings if e.kind in NON_STREAMED]
        compared = [e for e in streams if e.identical is not None]
        return {
            "started": dict(self.started), "ended": dict(ended),
            "each_request_one_outcome": dict(ended) == dict(self.started),
            "outcomes": {kind: dict(c) for kind, c in sorted(counts.items())},
            "non_streamed_success": _share(others),
            "streams_completed": _share(streams),
            "greedy_identical": (sum(1 for e in compared if e.identical) / len(compared)) if compared else None,
            "greedy_compared": len(compared),
            "late": sum(1 for e in self.endings if e.late),
            "stream_reconnects": sum(e.reconnects for e in streams),
            "resends": sum(e.reconnects for e in others),
            "max_latency_s": round(max((e.latency_s for e in self.endings), default=0.0), 3),
            "latency_s": {kind: _quantiles([e.latency_s for e in self.endings if e.kind == kind])
                          for kind in sorted(ended)},
        }


def _quantiles(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    def at(q: float) -> float:
        return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)
    return {"p50": at(0.5), "p99": at(0.99), "max": round(ordered[-1], 3)}


def _share(endings: list[Ending]) -> float | None:
    return sum(1 for e in endings if e.outcome == "completed") / len(endings) if endings else None


def targets(report: dict[str, Any]) -> dict[str, bool]:
    """The issue's targets: one outcome each, >= 99 % non-streamed success and completed streams,
    every compared greedy stream identical, nobody past a deadline."""
    return {
        "each_request_one_outcome": bool(report["each_request_one_outcome"]),
        "non_streamed_success_99": (report["non_streamed_success"] or 0.0) >= MIN_SUCCESS,
        "streams_completed_99": (report["streams_completed"] or 0.0) >= MIN_SUCCESS,
        "greedy_identical": report["greedy_identical"] == 1.0,
        "none_late": report["late"] == 0,
    }
