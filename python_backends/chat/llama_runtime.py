"""The llama.cpp calls of the batching engine, through llama-cpp-python's low-level API.

``LlamaRuntime`` owns one model and one context with one KV *stream* per sequence id
``0 .. max_sequences-1`` (``kv_unified = False``), each of ``cells_per_sequence`` cells.
``decode`` runs one ``llama_batch`` holding tokens of several sequences (each token tagged with
its sequence id and position) and returns the logits rows asked for; ``remove`` empties a
sequence's stream. The paged accounting that admits and preempts lives in ``block_pool``.

Why not one unified cache shared by all sequences (which would let one long sequence use the
room of many short ones): after sequences finish, llama.cpp refills the freed cells first, so a
running sequence's later tokens land *before* its earlier ones, and attention then sums over its
cells in another order. Measured on SmolLM2: the same last token with an out-of-order cell moves
logits by up to 0.64 and 5 of 8 greedy generations run together diverged from their solo runs.
With a stream per sequence its cells are always in position order and a sequence's output does
not depend on its batch mates (8 of 8 identical).

Thread contract: every method must be called from the one thread that drives the engine
(llama.cpp contexts are not thread-safe, and a second calling thread starts a second OpenMP team
that halves decode speed on a 2-core host).
"""

from __future__ import annotations

import ctypes
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from python_backends.chat.grammar import GrammarConstraint


class KvSlotError(RuntimeError):
    """llama.cpp found no free KV cells for the batch; its memory state is unchanged."""


@dataclass(frozen=True)
class BatchEntry:
    """One token fed to the model: sequence id, position in that sequence, whether its logits
    are wanted (the last token of a sequence's chunk when it completes the sequence's input)."""

    token: int
    seq_id: int
    pos: int
    logits: bool


class LlamaRuntime:
    def __init__(self, model_path: Path, cells_per_sequence: int, max_sequences: int, max_batch_tokens: int,
                 n_threads: int, flash_attention: bool = False) -> None:
        import logging

        import llama_cpp

        logging.getLogger("llama-cpp-python").setLevel(logging.ERROR)  # llama.cpp's load chatter

        self._lib = llama_cpp
        if not model_path.is_file():
            raise FileNotFoundError(f"no GGUF model at {model_path}")
        llama_cpp.llama_backend_init()
        model_params = llama_cpp.llama_model_default_params()
        self._model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), model_params)
        if not self._model:
            raise RuntimeError(f"llama.cpp could not load {model_path}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self._vocab))
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = cells_per_sequence * max_sequences
        params.n_batch = max_batch_tokens
        params.n_ubatch = max_batch_tokens
        params.n_seq_max = max_sequences
        params.kv_unified = False  # one stream per sequence id: see the module docstring
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.no_perf = True
        params.flash_attn_type = (llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED if flash_attention
                                  else llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED)
        self._ctx = llama_cpp.llama_init_from_model(self._model, params)
        if not self._ctx:
            raise RuntimeError("llama.cpp could not create a context")
        self._memory = llama_cpp.llama_get_memory(self._ctx)
        self.cells_per_sequence = int(llama_cpp.llama_n_ctx(self._ctx)) // max_sequences
        self.max_batch_tokens = max_batch_tokens
        self.max_sequences = max_sequences
        self._batch = llama_cpp.llama_batch_init(max_batch_tokens, 0, 1)
        self._piece = ctypes.create_string_buffer(256)
        self._grammar_tokenizer: object | None = None

    def tokenize(self, text: str) -> list[int]:
        """Token ids of an already templated prompt (special tokens parsed, BOS per the model)."""
        data = text.encode("utf-8")
        size = len(data) + 8
        buffer = (self._lib.llama_token * size)()
        count = self._lib.llama_tokenize(self._vocab, data, len(data), buffer, size, True, True)
        if count < 0:
            size = -count
            buffer = (self._lib.llama_token * size)()
            count = self._lib.llama_tokenize(self._vocab, data, len(data), buffer, size, True, True)
        return list(buffer[:count])

    def piece(self, token: int) -> bytes:
        """The bytes of one generated token (special tokens are not rendered)."""
        count = self._lib.llama_token_to_piece(self._vocab, token, self._piece, len(self._piece), 0, False)
        return bytes(self._piece.raw[:max(count, 0)])

    def grammar(self, grammar: str) -> GrammarConstraint:
        """A constraint that follows the llguidance ``grammar`` from its start (InvalidInputError
        when it does not compile); the first call builds llguidance's tokenizer (about 1.5 s)."""
        if self._grammar_tokenizer is None:
            from llguidance.llamacpp import lltokenizer_from_vocab

            self._grammar_tokenizer = lltokenizer_from_vocab(self._vocab)
        return GrammarConstraint(self._grammar_tokenizer, grammar, self.n_vocab)

    def is_end(self, token: int) -> bool:
        return bool(self._lib.llama_vocab_is_eog(self._vocab, token))

    def decode(self, entries: Sequence[BatchEntry]) -> list[np.ndarray]:
        """Run one batch; return the logits rows (float32 copies) of the entries with ``logits``,
        in entry order. Raise ``KvSlotError`` when the KV cache has no room (nothing changed)."""
        if not 0 < len(entries) <= self.max_batch_tokens:
            raise ValueError(f"a batch holds 1..{self.max_batch_tokens} tokens, not {len(entries)}")
        batch = self._batch
        wanted = []
        for i, entry in enumerate(entries):
            batch.token[i] = entry.token
            batch.pos[i] = entry.pos
            batch.n_seq_id[i] = 1
            batch.seq_id[i][0] = entry.seq_id
            batch.logits[i] = entry.logits
            if entry.logits:
                wanted.append(i)
        batch.n_tokens = len(entries)
        code = self._lib.llama_decode(self._ctx, batch)
        if code == 1:
            raise KvSlotError("no free KV cells for the batch")
        if code != 0:
            raise RuntimeError(f"llama_decode failed with code {code}")
        rows = []
        for i in wanted:
            pointer = self._lib.llama_get_logits_ith(self._ctx, i)
            rows.append(np.ctypeslib.as_array(pointer, shape=(self.n_vocab,)).copy())
        return rows

    def remove(self, seq_id: int) -> None:
        """Free every KV cell of sequence ``seq_id`` (removing a whole sequence cannot fail)."""
        self._lib.llama_memory_seq_rm(self._memory, seq_id, -1, -1)

    def trim(self, seq_id: int, keep: int) -> None:
        """Free the cells of sequence ``seq_id`` from position ``keep`` on (the prefix stays)."""
        if not self._lib.llama_memory_seq_rm(self._memory, seq_id, keep, -1):
            raise RuntimeError(f"llama.cpp could not trim sequence {seq_id} to {keep} tokens")

    def copy_prefix(self, source: int, target: int, keep: int) -> None:
        """Make sequence ``target`` hold the first ``keep`` positions of sequence ``source``.

        Streams are separate buffers, so llama.cpp copies the source's whole stream (K and V of
        every layer) at the start of the next ``decode``, before that batch is placed; the cells
        past ``keep`` are dropped from the target at once. The copied cells are the values a
        prefill of those tokens computes (a token's KV depends only on the tokens before it)."""
        self._lib.llama_memory_seq_cp(self._memory, source, target, -1, -1)
        self.trim(target, keep)

    def used_cells(self, seq_id: int) -> int:
        """Number of positions sequence ``seq_id`` holds in the cache (0 when empty)."""
        high = self._lib.llama_memory_seq_pos_max(self._memory, seq_id)
        return 0 if high < 0 else int(high) + 1

    def close(self) -> None:
        if self._batch is not None:
            self._lib.llama_batch_free(self._batch)
            self._batch = None
        if self._ctx:
            self._lib.llama_free(self._ctx)
            self._ctx = None
        if self._model:
            self._lib.llama_model_free(self._model)
            self._model = None
