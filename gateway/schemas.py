"""Request bodies of the OpenAI-compatible and rerank APIs (pydantic, validated at the edge).

Unknown fields are ignored so that newer SDKs keep working; fields we do not support with a
non-default value (``n > 1``, ``logprobs``, ``echo``) are rejected by the routes with a 400.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

MAX_STOP_STRINGS = 4
MAX_EMBEDDING_INPUTS = 2048
MAX_RERANK_DOCUMENTS = 1000

Probability = Annotated[float, Field(gt=0.0, le=1.0)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Stop = str | Annotated[list[str], Field(max_length=MAX_STOP_STRINGS)] | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Body):
    type: str
    text: str | None = None


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[ContentPart] | None = None
    name: str | None = None


class StreamOptions(_Body):
    include_usage: bool = False


class _Sampling(_Body):
    model: Annotated[str, Field(min_length=1, max_length=128)]
    temperature: Temperature | None = None
    top_p: Probability | None = None
    top_k: Annotated[int, Field(ge=0)] | None = None
    seed: int | None = None
    stop: Stop = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, Field(ge=1)] = 1
    user: str | None = None


class ChatCompletionRequest(_Sampling):
    messages: Annotated[list[ChatMessage], Field(min_length=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = None
    max_completion_tokens: Annotated[int, Field(ge=1)] | None = None
    logprobs: bool | None = None


class CompletionRequest(_Sampling):
    prompt: str | Annotated[list[str], Field(min_length=1, max_length=1)]
    max_tokens: Annotated[int, Field(ge=1)] | None = 16
    echo: bool = False
    logprobs: int | None = None
    suffix: str | None = None


class EmbeddingRequest(_Body):
    model: Annotated[str, Field(min_length=1, max_length=128)]
    input: str | Annotated[list[str], Field(min_length=1, max_length=MAX_EMBEDDING_INPUTS)]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: str | None = None


class RerankDocument(_Body):
    text: str


class RerankRequest(_Body):
    model: Annotated[str, Field(min_length=1, max_length=128)]
    query: Annotated[str, Field(min_length=1)]
    documents: Annotated[list[str | RerankDocument], Field(min_length=1, max_length=MAX_RERANK_DOCUMENTS)]
    top_n: Annotated[int, Field(ge=1)] | None = None
    return_documents: bool = False


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
