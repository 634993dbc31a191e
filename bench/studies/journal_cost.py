"""What journaling a stream costs each token: SSE events sent once Redis holds them, against none.

``python -m bench studies.journal_cost [--streams 1,16] [--tokens 200] [--token-interval-ms 20]
[--rounds 3] [--redis-port 21379]`` starts a redis-server of its own on 127.0.0.1 and, for each
stream count, runs that many streams at once through ``gateway.stream_journal.StreamEvents.sent``
with the Redis journal (``RedisStateStore``, as a gateway would) and without one, alternated for
``--rounds`` rounds. Each stream produces ``--tokens`` events, one every ``--token-interval-ms``
(0: as fast as they are taken). Measured per event: the seconds from its production to its
delivery (p50, p99), and the events per Redis append (the group commit's batch). Prints JSON.
"""

from __future__ import annotations

import asyncio
import json
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from bench.load import percentile
from control.redis_server import LocalRedis
from gateway.state_store.protocol import StreamEvent
from gateway.state_store.redis_store import RedisStateStore
from gateway.stream_journal import Journal, Outgoing, StreamEvents

app = typer.Typer(add_completion=False)


class CountingStore(RedisStateStore):
    """The Redis store, counting its journal appends."""

    appends = 0

    async def append_stream(self, request_id: str, events: Sequence[StreamEvent], done: bool,
                            ttl_s: float) -> None:
        self.appends += 1
        await super().append_stream(request_id, events, done, ttl_s)


async def _stream(events: StreamEvents, tokens: int, interval_s: float) -> list[float]:
    produced: dict[int, float] = {}

    async def source() -> AsyncIterator[Outgoing]:
        for n in range(tokens):
            outgoing = events.event({"n": n, "text": "token"}, (n,), done=n == tokens - 1)
            produced[outgoing.event.seq] = time.perf_counter()
            yield outgoing
            await asyncio.sleep(interval_s)

    delays = []
    async for sent in events.sent(source()):
        seq = int(str(sent.id).rpartition(":")[2])
        delays.append(time.perf_counter() - produced[seq])
    return delays


async def _round(store: CountingStore | None, streams: int, tokens: int, interval_s: float,
                 tag: str) -> tuple[list[float], int]:
    def events(i: int) -> StreamEvents:
        request_id = f"{tag}-{i}"
        journal = Journal(store, request_id, "bench", b"{}", "bench-gw", 60.0) if store is not None else None
        return StreamEvents(request_id, journal)

    before = store.appends if store is not None else 0
    results = await asyncio.gather(*(_stream(events(i), tokens, interval_s) for i in range(streams)))
    return [d for r in results for d in r], (store.appends - before if store is not None else 0)


def _ms(values: list[float], q: float) -> float:
    return round(percentile(values, q) * 1000, 3)


async def measure(port: int, stream_counts: list[int], tokens: int, interval_s: float, rounds: int) -> dict[str, Any]:
    store = CountingStore(f"redis://127.0.0.1:{port}/0", journal_timeout_s=2.0)
    await store.start()
    report: dict[str, Any] = {}
    try:
        for streams in stream_counts:
            rows: dict[str, list[dict[str, float]]] = {"journal": [], "none": []}
            for r in range(rounds):
                for mode in ("journal", "none"):
                    delays, appends = await _round(store if mode == "journal" else None, streams, tokens,
                                                   interval_s, f"s{streams}-r{r}")
                    rows[mode].append({"p50_ms": _ms(delays, 50), "p99_ms": _ms(delays, 99),
                                       "events_per_append": round(len(delays) / appends, 2) if appends else 0.0})
            report[str(streams)] = {mode: {key: statistics.median(row[key] for row in mode_rows)
                                           for key in mode_rows[0]} for mode, mode_rows in rows.items()}
    finally:
        await store.close()
    return report


@app.command()
def main(streams: Annotated[str, typer.Option(help="stream counts, comma separated")] = "1,16",
         tokens: Annotated[int, typer.Option(min=1)] = 200,
         token_interval_ms: Annotated[float, typer.Option(min=0)] = 20.0,
         rounds: Annotated[int, typer.Option(min=1)] = 3,
         redis_port: Annotated[int, typer.Option()] = 21379) -> None:
    """Run the study; see the module docstring."""
    with tempfile.TemporaryDirectory(prefix="shunter-journal-") as tmp:
        redis = LocalRedis(redis_port, Path(tmp))
        redis.start()
        try:
            report = asyncio.run(measure(redis_port, [int(s) for s in streams.split(",")], tokens,
                                         token_interval_ms / 1000, rounds))
        finally:
            redis.stop()
    print(json.dumps({"tokens": tokens, "token_interval_ms": token_interval_ms, "rounds": rounds,
                      "medians_of_rounds": report}, indent=2))


if __name__ == "__main__":
    app()
