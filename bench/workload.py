"""The fixed inputs every benchmark request draws from, built once at start.

``Workload.build()`` loads real data (photos from ``skimage.data`` encoded to JPEG with Pillow,
rows of ``sklearn.datasets.load_digits``) and fixed text; request ``i`` of any model uses item
``i % len(items)`` so that consecutive requests vary but every run sends the same inputs.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np

SENTENCES: tuple[str, ...] = (
    "The quick brown fox jumps over the lazy dog.",
    "Triton batches requests from many clients into one model execution.",
    "A gateway adds authentication, quotas and fair scheduling in front of the workers.",
    "Trains leave the station every ten minutes during rush hour.",
    "Embeddings map sentences with similar meaning to nearby vectors.",
    "The cat slept on the warm windowsill all afternoon.",
    "Latency percentiles matter more than averages for interactive services.",
    "She planted tomatoes, basil and peppers in the spring garden.",
    "GPUs are most efficient when they process large batches at once.",
    "The museum opens at nine and closes at six on weekdays.",
    "Rain is expected tomorrow, with clearing skies by the evening.",
    "Closed-loop load generators send the next request once the previous one answers.",
)
QUERIES: tuple[str, ...] = (
    "How does dynamic batching improve throughput?",
    "What should I plant in a vegetable garden?",
    "When does the train leave?",
    "Why measure tail latency?",
)
DOCUMENTS: tuple[str, ...] = SENTENCES[:8]
IMAGE_NAMES: tuple[str, ...] = ("chelsea", "coffee", "astronaut", "rocket")
CHAT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"
CHAT_USER = "Write a haiku about trains."


def chat_prompt(system: str, user: str) -> str:
    """The chat model's own template applied to [system, user] (what the gateway renders itself)."""
    return f"<|im_start|>system\n{system}<|im_end|>\n<|im_start|>user\n{user}<|im_end|>\n<|im_start|>assistant\n"


CHAT_PROMPT = chat_prompt(CHAT_SYSTEM, CHAT_USER)
CHAT_MAX_TOKENS = 64


def _jpeg(name: str) -> bytes:
    from PIL import Image
    from skimage import data

    array = getattr(data, name)()
    image = Image.fromarray(array).convert("RGB")
    buffer = io.BytesIO()
    image.save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


@dataclass(frozen=True)
class Workload:
    """Inputs for each model; every tuple is non-empty."""

    sentences: tuple[str, ...]
    queries: tuple[str, ...]
    documents: tuple[str, ...]
    images: tuple[bytes, ...]
    digits: np.ndarray  # FP32 [n, 64], values 0..16

    @classmethod
    def build(cls) -> Workload:
        from sklearn.datasets import load_digits

        digits = load_digits().data.astype(np.float32)
        return cls(SENTENCES, QUERIES, DOCUMENTS, tuple(_jpeg(n) for n in IMAGE_NAMES), digits)
