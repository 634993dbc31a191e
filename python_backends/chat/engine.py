"""CPU reference LLM engine: llama.cpp (via llama-cpp-python) over a GGUF model.

``LlamaEngine.generate(prompt, params, is_cancelled)`` yields ``Delta``s: text safe to send
(see ``text_stream``), and a last delta with ``finish_reason`` in {"stop", "length",
"cancelled"} and the usage counts. One engine serves one request at a time (llama.cpp contexts
are not thread-safe); the Triton adapter feeds it from a queue. Greedy decoding
(``temperature == 0``) is deterministic; sampled decoding depends only on the request's seed.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from python_backends.batching import InvalidInputError
from python_backends.chat.params import GenerationParams
from python_backends.chat.text_stream import StopTextStream


@dataclass(frozen=True)
class Delta:
    text: str
    finish_reason: str | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0


class LlamaEngine:
    def __init__(self, model_path: Path, context_tokens: int, n_threads: int) -> None:
        import llama_cpp

        self._llama_cpp = llama_cpp
        self.context_tokens = context_tokens
        self.llm = llama_cpp.Llama(
            model_path=str(model_path),
            n_ctx=context_tokens,
            n_threads=n_threads,
            n_threads_batch=n_threads,
            n_batch=512,
            verbose=False,
        )
        self._vocab = self.llm._model.vocab

    def tokenize(self, prompt: str) -> list[int]:
        """Token ids of an already templated prompt (special tokens parsed, BOS per the model)."""
        return list(self.llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    def _is_end(self, token: int) -> bool:
        return bool(self._llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def generate(
        self, prompt: str, params: GenerationParams, is_cancelled: Callable[[], bool]
    ) -> Iterator[Delta]:
        tokens = self.tokenize(prompt)
        if not tokens:
            raise InvalidInputError("prompt", "is empty")
        room = self.context_tokens - len(tokens)
        if room < 1:
            raise InvalidInputError(
                "prompt", f"has {len(tokens)} tokens; the context holds {self.context_tokens}"
            )
        budget = min(params.max_tokens, room)
        stream = StopTextStream(params.stop)
        self.llm.set_seed(params.seed)
        generated = 0
        finish = "length"
        for token in self.llm.generate(
            tokens, top_k=params.top_k, top_p=params.top_p, min_p=0.0, typical_p=1.0,
            temp=params.temperature, repeat_penalty=1.0,
        ):
            if is_cancelled():
                finish = "cancelled"
                break
            if self._is_end(token):
                finish = "stop"
                break
            generated += 1
            text = stream.push(self.llm.detokenize([token]))
            if stream.stopped:
                finish = "stop"
                if text:
                    yield Delta(text)
                break
            if text:
                yield Delta(text)
            if generated >= budget:
                break
        yield Delta(stream.flush(), finish, len(tokens), generated)
