"""Engine parameters of LLM models, read once from the model's string ``parameters``.

Two engines serve LLMs: the CPU batching engine (``python_backends/chat``) and TensorRT-LLM on
GPU pools. ``EngineConfig.from_parameters(params)`` validates the CPU engine's parameters (the
engine calls it at model load, so bad values fail the load; control and the gateway call it via
``cpu_engine_config`` when they read ``models.yaml``); ``trtllm_settings`` does the same for
TensorRT-LLM's. ``engine_reuses_prefixes`` tells the scheduler whether the engine on a pool reuses
cached prompt prefixes. ``kv_cache_tokens`` absent means ``default_kv_cache_tokens(context_tokens)``.

Why ``max_batch_tokens`` defaults to 63: llama.cpp's CPU kernels switch to another matrix
multiplication path when one ``llama_decode`` call holds 64 tokens or more, and that path rounds
differently (measured on SmolLM2 Q4_1: a prompt decoded in a 63-token batch gives the same greedy
output as alone, in a 64-token batch it diverges within a few tokens). Keeping every step below
64 tokens makes a sequence's greedy output independent of its batch mates at a cost of ~13 % in
prefill speed (268 vs 309 prefill tokens/s); decode steps (one token per sequence) are unaffected.
Flash attention is on: it is faster here, and the batch-invariance measurements were made with it.
The pool is the engine's memory budget; llama.cpp itself reserves ``cells_per_sequence`` cells for
each of the ``max_running`` sequence slots (see ``llama_runtime`` for why).
"""

from __future__ import annotations

from dataclasses import dataclass

from settings.base import ConfigError
from settings.stack import ModelSpec, WorkloadKind


def default_kv_cache_tokens(context_tokens: int) -> int:
    """The pool size when none is configured: room for two full-context sequences."""
    return 2 * context_tokens


DEFAULT_THREADS = 2  # llama.cpp threads when the model's parameters do not set n_threads


@dataclass(frozen=True)
class EngineConfig:
    context_tokens: int  # longest sequence (prompt + generated), tokens
    kv_cache_tokens: int  # paged pool capacity, tokens (rounded down to whole blocks)
    block_tokens: int = 16
    max_running: int = 16  # sequences decoding together (llama.cpp n_seq_max)
    max_batch_tokens: int = 63  # tokens per model step; see the module docstring
    prefill_chunk_tokens: int = 63  # prefill tokens per model step
    n_threads: int = DEFAULT_THREADS
    flash_attention: bool = True
    prefix_cache: bool = True  # reuse a finished sequence's KV prefix in its slot (scheduler docstring)
    short_prefill_first: bool = True  # a short new prompt's prefill gets a step of its own (scheduler docstring)
    stream_interval_tokens: int = 1  # text is sent every this many tokens (the first at once; engine docstring)
    max_waiting: int = 64  # sequences waiting for admission beyond which a new one is refused (engine docstring)

    def __post_init__(self) -> None:
        if self.context_tokens < 2:
            raise ValueError("context_tokens must be at least 2")
        if self.block_tokens < 1 or self.kv_cache_tokens < self.block_tokens:
            raise ValueError("kv_cache_tokens must hold at least one block")
        if not 0 < self.max_running < self.max_batch_tokens:
            raise ValueError("max_running must be in 1..max_batch_tokens-1")
        if min(self.prefill_chunk_tokens, self.n_threads, self.stream_interval_tokens, self.max_waiting) < 1:
            raise ValueError("prefill_chunk_tokens, n_threads, stream_interval_tokens and max_waiting_sequences"
                             " must be positive")

    @property
    def total_blocks(self) -> int:
        return self.kv_cache_tokens // self.block_tokens

    @property
    def sequence_limit_tokens(self) -> int:
        """Longest sequence the engine runs: the context, or the pool if it is smaller."""
        return min(self.context_tokens, self.total_blocks * self.block_tokens)

    @property
    def cells_per_sequence(self) -> int:
        """llama.cpp cells of each sequence's stream: the sequence limit, in 256-cell units."""
        return -(-self.sequence_limit_tokens // 256) * 256

    @classmethod
    def from_parameters(cls, params: dict[str, str]) -> EngineConfig:
        """Build from string parameters; raise ValueError naming the bad one."""
        def number(name: str, default: int) -> int:
            try:
                return int(params.get(name, default))
            except ValueError:
                raise ValueError(f"parameter {name} must be an integer, not {params[name]!r}") from None

        def flag(name: str) -> bool:
            return params.get(name, "true").lower() in ("1", "true", "yes")

        context = number("context_tokens", 0)
        return cls(
            context_tokens=context,
            kv_cache_tokens=number("kv_cache_tokens", default_kv_cache_tokens(context)),
            block_tokens=number("kv_block_tokens", 16),
            max_running=number("max_running_sequences", 16),
            max_batch_tokens=number("max_batch_tokens", 63),
            prefill_chunk_tokens=number("prefill_chunk_tokens", 63),
            n_threads=number("n_threads", DEFAULT_THREADS),
            flash_attention=flag("flash_attention"),
            prefix_cache=flag("prefix_cache"),
            short_prefill_first=flag("short_prefill_first"),
            stream_interval_tokens=number("stream_interval_tokens", 1),
            max_waiting=number("max_waiting_sequences", 64),
        )


TRTLLM_SCHEDULER_POLICIES = ("guaranteed_no_evict", "max_utilization")


def uses_trtllm(model: ModelSpec, gpu_type: str) -> bool:
    """Whether ``model`` runs on TensorRT-LLM on a pool of ``gpu_type`` (an LLM on a GPU pool)."""
    return model.kind is WorkloadKind.LLM and gpu_type != "cpu"


def cpu_engine_config(model: ModelSpec) -> EngineConfig:
    """The CPU chat engine's settings for LLM ``model``, as the engine reads its parameters;
    ConfigError naming a bad one."""
    parameters = {"context_tokens": str(model.context_tokens), **model.parameters}
    try:
        return EngineConfig.from_parameters(parameters)
    except ValueError as exc:
        raise ConfigError(f"model {model.name}: {exc}") from exc


def trtllm_settings(model: ModelSpec) -> dict[str, str]:
    """TensorRT-LLM settings from the model's parameters, with defaults; ConfigError on a bad
    policy or fraction. ``max_tokens_in_paged_kv_cache`` is the CPU pool's ``kv_cache_tokens``."""
    params = model.parameters
    settings = {
        "engine_dir": params.get("trtllm_engine_dir", f"/models/{model.name}/trtllm_engine"),
        "tokenizer_dir": params.get("trtllm_tokenizer_dir", f"/models/{model.name}/tokenizer"),
        "batch_scheduler_policy": params.get("trtllm_batch_scheduler_policy", "max_utilization"),
        "kv_cache_free_gpu_mem_fraction": params.get("trtllm_kv_cache_free_gpu_mem_fraction", "0.9"),
        "max_tokens_in_paged_kv_cache": params.get("kv_cache_tokens", str(2 * model.context_tokens)),
        "enable_chunked_context": params.get("trtllm_enable_chunked_context", "true"),
        "enable_kv_cache_reuse": params.get("trtllm_enable_kv_cache_reuse", "false"),
        "max_num_sequences": params.get("trtllm_max_num_sequences", "64"),
    }
    if settings["enable_kv_cache_reuse"] not in ("true", "false"):
        raise ConfigError(f"model {model.name}: trtllm_enable_kv_cache_reuse must be true or false "
                          "(true needs an engine built with paged context FMHA)")
    if settings["batch_scheduler_policy"] not in TRTLLM_SCHEDULER_POLICIES:
        raise ConfigError(f"model {model.name}: trtllm_batch_scheduler_policy must be one of "
                          f"{TRTLLM_SCHEDULER_POLICIES}")
    try:
        fraction = float(settings["kv_cache_free_gpu_mem_fraction"])
    except ValueError:
        fraction = -1.0
    if not 0.0 < fraction < 1.0:
        raise ConfigError(f"model {model.name}: trtllm_kv_cache_free_gpu_mem_fraction must be in (0, 1)")
    return settings


def engine_reuses_prefixes(model: ModelSpec, gpu_type: str) -> bool:
    """Whether the engine that serves LLM ``model`` on ``gpu_type`` reuses cached prompt prefixes:
    TensorRT-LLM's ``enable_kv_cache_reuse``, or the CPU engine's ``prefix_cache``. ConfigError on
    a bad setting."""
    if uses_trtllm(model, gpu_type):
        return trtllm_settings(model)["enable_kv_cache_reuse"] == "true"
    return cpu_engine_config(model).prefix_cache
