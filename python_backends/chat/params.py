"""Per-request generation parameters of the ``chat`` model, parsed from Triton inputs.

Defaults follow the OpenAI API (temperature 1, top_p 1, no top_k); ``temperature == 0`` means
greedy decoding. A request without a seed gets a fresh random one, so its sampling never depends
on which requests ran before it.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import numpy as np

from python_backends.batching import InvalidInputError, Tensors, decode_texts

MAX_STOP_STRINGS = 4
MAX_GRAMMAR_BYTES = 1 << 20


@dataclass(frozen=True)
class GenerationParams:
    max_tokens: int
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    seed: int = 0
    stop: tuple[str, ...] = ()
    grammar: str = ""  # llguidance grammar the output must follow (``grammar.py``); empty: unconstrained


def _scalar(inputs: Tensors, name: str) -> float | int | None:
    if name not in inputs:
        return None
    values = np.asarray(inputs[name]).reshape(-1)
    if values.size != 1:
        raise InvalidInputError(name, "must hold exactly one value")
    value = values[0].item()
    if not np.isfinite(value):
        raise InvalidInputError(name, "must be a finite number")
    return value  # type: ignore[no-any-return]


def parse_params(inputs: Tensors, default_max_tokens: int, rng: random.Random) -> GenerationParams:
    """Validated parameters; raise InvalidInputError naming the offending input."""
    max_tokens = _scalar(inputs, "max_tokens")
    temperature = _scalar(inputs, "temperature")
    top_p = _scalar(inputs, "top_p")
    top_k = _scalar(inputs, "top_k")
    seed = _scalar(inputs, "seed")
    stop = tuple(decode_texts(inputs, "stop")) if "stop" in inputs else ()
    grammar = decode_texts(inputs, "grammar")[0] if "grammar" in inputs else ""
    params = GenerationParams(
        max_tokens=int(max_tokens) if max_tokens is not None else default_max_tokens,
        temperature=float(temperature) if temperature is not None else 1.0,
        top_p=float(top_p) if top_p is not None else 1.0,
        top_k=int(top_k) if top_k is not None else 0,
        seed=int(seed) if seed is not None else rng.getrandbits(31),
        stop=stop,
        grammar=grammar,
    )
    _check(params)
    return params


def _check(params: GenerationParams) -> None:
    if params.max_tokens < 1:
        raise InvalidInputError("max_tokens", "must be at least 1")
    if not 0.0 <= params.temperature <= 2.0:
        raise InvalidInputError("temperature", "must be between 0 and 2")
    if not 0.0 < params.top_p <= 1.0:
        raise InvalidInputError("top_p", "must be in (0, 1]")
    if params.top_k < 0:
        raise InvalidInputError("top_k", "must be 0 (disabled) or positive")
    if len(params.stop) > MAX_STOP_STRINGS:
        raise InvalidInputError("stop", f"at most {MAX_STOP_STRINGS} stop strings")
    if len(params.grammar.encode("utf-8")) > MAX_GRAMMAR_BYTES:
        raise InvalidInputError("grammar", f"is longer than {MAX_GRAMMAR_BYTES} bytes")


MAX_CONTINUATION_TOKENS = 1 << 20


def parse_continuation(inputs: Tensors) -> tuple[int, ...]:
    """The optional ``continuation`` input: the token ids a resumed generation already produced."""
    if "continuation" not in inputs:
        return ()
    values = np.asarray(inputs["continuation"]).reshape(-1)
    if values.size > MAX_CONTINUATION_TOKENS or not np.issubdtype(values.dtype, np.integer):
        raise InvalidInputError("continuation", "must be at most 2**20 integer token ids")
    return tuple(int(v) for v in values)


def parse_priority(inputs: Tensors) -> int:
    """The optional ``priority`` input (higher is more important; absent: 0, the least)."""
    value = _scalar(inputs, "priority")
    if value is None:
        return 0
    if not 0 <= int(value) <= 1000:
        raise InvalidInputError("priority", "must be between 0 and 1000")
    return int(value)
