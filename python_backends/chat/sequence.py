"""One generation inside the batching engine: its tokens, its KV progress and its output sink.

A ``Sequence`` holds ``tokens`` (prompt, then every generated token) and ``computed``, how many
of them have KV cells; ``pending = len(tokens) - computed`` tokens still have to be fed (the
whole prompt at first, then the one token sampled last). Preemption resets ``computed`` to 0 and
keeps ``tokens``, so recompute feeds prompt + generated text again and continues where it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from python_backends.chat.grammar import GrammarConstraint
from python_backends.chat.params import GenerationParams
from python_backends.chat.sampler import TokenSampler
from python_backends.chat.text_stream import StopTextStream

FINISH_REASONS = ("stop", "length", "cancelled")


@dataclass(frozen=True)
class Delta:
    """Text safe to send; the last delta of a generation carries ``finish_reason`` and usage.
    ``token_ids``: the generated tokens accepted since the previous delta (the text of all of
    them, up to what the stop/UTF-8 stream still holds back, is in the deltas so far), so that a
    client holding every delta's ids can resume the generation elsewhere (``continuation``)."""

    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    token_ids: tuple[int, ...] = ()


class Sink(Protocol):
    """Where a sequence's deltas go (a Triton response sender in production)."""

    def send(self, delta: Delta) -> None: ...

    def is_cancelled(self) -> bool: ...

    def fail(self, error: Exception) -> None:
        """End the request with an error instead of a final delta (invalid input, engine failure)."""


@dataclass(eq=False)
class Sequence:
    """Mutable state of one request; owned by the engine thread."""

    number: int  # unique, increasing with arrival: the FIFO tie-break and the block-pool owner
    prompt_tokens: int
    max_new_tokens: int
    priority: int  # higher is more important
    params: GenerationParams
    sink: Sink
    tokens: list[int]
    sampler: TokenSampler = field(init=False)
    stream: StopTextStream = field(init=False)
    computed: int = 0
    slot: int | None = None  # llama.cpp sequence id while admitted
    admitted: int = -1  # admission stamp (higher = admitted more recently)
    preemptions: int = 0
    finish_reason: str | None = None
    unsent_text: str = ""  # generated text held back until the stream interval is reached
    unsent_tokens: int = 0  # tokens accepted since text was last sent
    unsent_ids: list[int] = field(default_factory=list)  # their ids
    sent_text: bool = False
    constraint: GrammarConstraint | None = None  # the grammar the output follows (params.grammar)

    def __post_init__(self) -> None:
        self.sampler = TokenSampler(self.params)
        self.stream = StopTextStream(self.params.stop)

    @property
    def generated(self) -> int:
        return len(self.tokens) - self.prompt_tokens

    @property
    def pending(self) -> int:
        return len(self.tokens) - self.computed

    @property
    def decoding(self) -> bool:
        """True when the only token to feed is the one sampled last (a decode step)."""
        return self.generated > 0 and self.pending == 1

    def waiting_key(self) -> tuple[int, int]:
        """Admission order: higher priority first, then earlier arrival."""
        return (-self.priority, self.number)
