"""Counting tokens with each model's own tokenizer, before anything is sent to a worker.

LLMs: llama.cpp loaded vocabulary-only from the served GGUF (the very tokenizer the engine
uses, so counts agree) plus the model's chat template from the GGUF metadata. Text encoders:
the model's ``tokenizer.json`` through Hugging Face ``tokenizers``.

Tokenising and templating a long text takes milliseconds to seconds, so the routes run them
through ``Offload``: on a few threads of their own, off the event loop (llama.cpp and
``tokenizers`` release the GIL while they work; a Jinja template yields it every few ms), with
short texts done inline where a thread hop would cost more than the work. An LLM prompt whose
bytes alone prove it cannot fit the context (``LlmTokenizer.min_tokens``) is never tokenised.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from tokenizers import Tokenizer

from gateway.generation_config import artifact_sampling
from settings.stack import SamplingDefaults


class LlmTokenizer:
    def __init__(self, gguf_path: Path) -> None:
        import llama_cpp
        from llama_cpp.llama_chat_format import Jinja2ChatFormatter

        self._llm = llama_cpp.Llama(model_path=str(gguf_path), vocab_only=True, verbose=False)
        template = self._llm.metadata.get("tokenizer.chat_template")
        if not template:
            raise ValueError(f"{gguf_path}: the model ships no chat template")
        eos = self._llm.detokenize([self._llm.token_eos()], special=True).decode()
        bos = self._llm.detokenize([self._llm.token_bos()], special=True).decode()
        self._formatter = Jinja2ChatFormatter(template=template, eos_token=eos, bos_token=bos,
                                              add_generation_prompt=True)
        self.max_token_bytes = max(1, max(len(self._llm.detokenize([token], special=True))
                                          for token in range(self._llm.n_vocab())))
        self.sampling: SamplingDefaults = artifact_sampling(gguf_path, self._llm.metadata)

    def min_tokens(self, prompt: str) -> int:
        """A lower bound of ``count(prompt)`` from its length alone (no token is longer than
        ``max_token_bytes``); O(1) for ASCII-heavy text, never tokenises."""
        return math.ceil(len(prompt.encode("utf-8", "surrogatepass")) / self.max_token_bytes)

    def tokens(self, prompt: str) -> list[int]:
        """The token ids the engine prefills for ``prompt`` (with BOS; special tokens parsed)."""
        return list(self._llm.tokenize(prompt.encode("utf-8"), add_bos=True, special=True))

    def count(self, prompt: str) -> int:
        return len(self.tokens(prompt))

    def apply_chat_template(self, messages: Sequence[dict[str, Any]]) -> str:
        return str(self._formatter(messages=list(messages)).prompt)  # type: ignore[arg-type]


class TextTokenizer:
    def __init__(self, tokenizer_json: Path) -> None:
        self._tokenizer = Tokenizer.from_file(str(tokenizer_json))
        self._tokenizer.no_truncation()
        self._tokenizer.no_padding()

    def counts(self, texts: Sequence[str]) -> list[int]:
        if len(texts) == 1:  # encode_batch's thread-pool hand-off costs more than one short text
            return [len(self._tokenizer.encode(texts[0]).ids)]
        return [len(e.ids) for e in self._tokenizer.encode_batch(list(texts))]


T = TypeVar("T")
INLINE_CHARS = 4096  # below this, work runs inline: a thread hop costs more than it


class Offload:
    """A few threads for CPU-heavy request work (tokenising, chat templates), off the event loop."""

    def __init__(self, threads: int, inline_chars: int = INLINE_CHARS) -> None:
        self._executor = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="tokenize")
        self.inline_chars = inline_chars

    async def run(self, size_chars: int, work: Callable[..., T], *args: Any) -> T:
        """``work(*args)``: inline when the input is ``inline_chars`` or less, else on a thread."""
        if size_chars <= self.inline_chars:
            return work(*args)
        return await asyncio.get_running_loop().run_in_executor(self._executor, functools.partial(work, *args))

    def close(self) -> None:
        self._executor.shutdown(wait=False, cancel_futures=True)
