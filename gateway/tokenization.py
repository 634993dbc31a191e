"""Counting tokens with each model's own tokenizer, before anything is sent to a worker.

LLMs: llama.cpp loaded vocabulary-only from the served GGUF (the very tokenizer the engine
uses, so counts agree) plus the model's chat template from the GGUF metadata. Text encoders:
the model's ``tokenizer.json`` through Hugging Face ``tokenizers``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer


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
