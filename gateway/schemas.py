"""Request bodies of the OpenAI-compatible and rerank APIs (pydantic, validated at the edge).

Chat and completion bodies keep the fields they do not declare (``model_extra``): the routes
refuse every one of them that is not null or its no-op value with a 400 naming it
(``gateway/request_parameters.py``), so no parameter is ever silently ignored. Other bodies
ignore unknown fields.

Every value is checked here, before any work: text is valid Unicode (JSON may escape a lone
surrogate, ``"\ud800"``, which no tokenizer or encoder takes), numbers lie in the range the
engine takes (``seed`` a non-negative 64-bit integer, ``top_p`` in (0, 1] and still above 0 as
the 32-bit float the engine receives, ``top_k`` a 32-bit integer). A value out of range is a 400
``invalid_value`` naming the parameter; a value of the wrong JSON type a 422 (gateway/app.py).
"""

from __future__ import annotations

import struct
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field
from pydantic_core import PydanticCustomError

MAX_STOP_STRINGS = 4
MAX_EMBEDDING_INPUTS = 2048
MAX_RERANK_DOCUMENTS = 1000
MAX_CHAT_MESSAGES = 1024
INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1


def _unicode(text: str) -> str:
    """``text`` if it is valid Unicode (no lone surrogate escapes)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise PydanticCustomError("invalid_text", "text must be valid Unicode: a lone surrogate escape at "
                                  "character {position}", {"position": exc.start}) from None
    return text


def _float32_positive(value: float) -> float:
    """``value`` if it stays above 0 as a 32-bit float (the engine's input type)."""
    if struct.unpack("f", struct.pack("f", value))[0] <= 0.0:
        raise PydanticCustomError("greater_than", "must stay above 0 as a 32-bit float (at least about 1.4e-45)")
    return value


Text = Annotated[str, AfterValidator(_unicode)]
ModelName = Annotated[Text, Field(min_length=1, max_length=128)]
Probability = Annotated[float, Field(gt=0.0, le=1.0), AfterValidator(_float32_positive)]
Temperature = Annotated[float, Field(ge=0.0, le=2.0)]
Seed = Annotated[int, Field(ge=0, le=INT64_MAX)]
Stop = Text | Annotated[list[Text], Field(max_length=MAX_STOP_STRINGS)] | None


class _Body(BaseModel):
    model_config = ConfigDict(extra="ignore")


class ContentPart(_Body):
    type: Text
    text: Text | None = None


class ChatMessage(_Body):
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: Text | Annotated[list[ContentPart], Field(max_length=MAX_CHAT_MESSAGES)] | None = None
    name: Text | None = None


class StreamOptions(_Body):
    include_usage: bool = False


class JsonSchemaFormat(_Body):
    name: Annotated[Text, Field(min_length=1, max_length=64)]
    description: Text | None = None
    schema_: dict[str, Any] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Body):
    type: Literal["text", "json_object", "json_schema"]
    json_schema: JsonSchemaFormat | None = None


class _Sampling(_Body):
    model_config = ConfigDict(extra="allow", populate_by_name=True)

    model: ModelName
    temperature: Temperature | None = None
    top_p: Probability | None = None
    top_k: Annotated[int, Field(ge=0, le=INT32_MAX)] | None = None
    seed: Seed | None = None
    stop: Stop = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    n: Annotated[int, Field(ge=1)] = 1
    user: Text | None = None


MaxTokens = Annotated[int, Field(ge=1, le=INT32_MAX)]


class ChatCompletionRequest(_Sampling):
    messages: Annotated[list[ChatMessage], Field(min_length=1, max_length=MAX_CHAT_MESSAGES)]
    max_tokens: MaxTokens | None = None
    max_completion_tokens: MaxTokens | None = None
    logprobs: bool | None = None
    response_format: ResponseFormat | None = None


class CompletionRequest(_Sampling):
    prompt: Text | Annotated[list[Text], Field(min_length=1, max_length=1)]
    max_tokens: MaxTokens | None = 16
    echo: bool = False
    logprobs: int | None = None
    suffix: Text | None = None


class EmbeddingRequest(_Body):
    model: ModelName
    input: Text | Annotated[list[Text], Field(min_length=1, max_length=MAX_EMBEDDING_INPUTS)]
    encoding_format: Literal["float", "base64"] = "float"
    dimensions: int | None = None
    user: Text | None = None


class RerankDocument(_Body):
    text: Text


class RerankRequest(_Body):
    model: ModelName
    query: Annotated[Text, Field(min_length=1)]
    documents: Annotated[list[Text | RerankDocument], Field(min_length=1, max_length=MAX_RERANK_DOCUMENTS)]
    top_n: Annotated[int, Field(ge=1)] | None = None
    return_documents: bool = False


def as_list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else [value]
