"""The engine thread: one per model instance; it makes every llama.cpp call, warm-up included.

``EngineLoop(build, publish)``: ``start(timeout_s)`` runs ``build()`` (which loads the model) and a
one-token warm-up on the new thread and returns once it is ready (raising if it failed or took too
long). ``submit(job)`` may be called from any thread; between steps the loop moves new jobs into
the engine, so requests join a running batch at the next iteration. ``publish(stats)`` is called
on the loop thread at most every ``publish_interval_s`` while busy and once whenever the engine
turns idle (so gauges fall back to zero). ``stop(timeout_s)`` ends the thread.

Why one thread: llama.cpp's OpenMP team belongs to the calling thread, and a second team (e.g.
from warming up on Triton's thread) keeps spinning and halves decode speed on a 2-core host
(measured: 88 -> 33 tokens/s).
"""

from __future__ import annotations

import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from python_backends.batching import InvalidInputError
from python_backends.chat.engine import BatchEngine, EngineSaturatedError, EngineStats, ListSink
from python_backends.chat.params import GenerationParams
from python_backends.chat.sequence import Sink


@dataclass(frozen=True)
class Job:
    prompt: str
    params: GenerationParams
    priority: int
    sink: Sink
    continuation: tuple[int, ...] = ()


class EngineLoop:
    def __init__(self, build: Callable[[], BatchEngine], publish: Callable[[EngineStats], None],
                 publish_interval_s: float = 0.25, idle_wait_s: float = 0.5) -> None:
        self._build = build
        self._publish = publish
        self._publish_interval_s = publish_interval_s
        self._idle_wait_s = idle_wait_s
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._ready = threading.Event()
        self._startup_error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="chat-engine", daemon=True)

    def start(self, timeout_s: float) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise TimeoutError(f"the chat engine did not warm up in {timeout_s:.0f} s")
        if self._startup_error is not None:
            raise RuntimeError(f"the chat engine failed to start: {self._startup_error}")

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def stop(self, timeout_s: float) -> None:
        self._jobs.put(None)
        self._thread.join(timeout_s)

    def _run(self) -> None:
        try:
            engine = self._build()
            engine.generate("Hello", GenerationParams(max_tokens=1, temperature=0.0), ListSink())
        except BaseException as exc:  # reported by start()
            self._startup_error = exc
            self._ready.set()
            return
        self._ready.set()
        self._publish(engine.stats())
        self._serve(engine)

    def _serve(self, engine: BatchEngine) -> None:
        last_publish = 0.0
        while True:
            if not self._take_jobs(engine, block=not engine.has_work):
                return
            try:
                engine.step()
            except Exception as exc:  # fail what was running; keep serving
                for seq in engine.fail_all():
                    seq.sink.fail(exc)
            now = time.monotonic()
            if not engine.has_work or now - last_publish >= self._publish_interval_s:
                self._publish(engine.stats())
                last_publish = now

    def _take_jobs(self, engine: BatchEngine, block: bool) -> bool:
        """Move queued jobs into the engine; False when asked to stop."""
        while True:
            try:
                job = self._jobs.get(timeout=self._idle_wait_s) if block else self._jobs.get_nowait()
            except queue.Empty:
                return True
            if job is None:
                return False
            block = False
            try:
                engine.submit(job.prompt, job.params, job.sink, job.priority, job.continuation)
            except (InvalidInputError, EngineSaturatedError) as exc:
                job.sink.fail(exc)

