"""``response_format`` to the grammar the engine constrains decoding with (llguidance).

``json_object`` allows any JSON object; ``json_schema`` allows what its ``schema`` validates
(``strict`` or not: the schema is always enforced, which is what ``strict: true`` promises),
written on one line with ``", "`` and ``": "`` between items (no free whitespace to ramble in).
The grammar is llguidance's (``LLMatcher.grammar_from_json_schema``); the CPU engine compiles it
against its vocabulary (``python_backends/chat/grammar.py``). A schema llguidance cannot compile
is a 400 naming ``response_format.json_schema.schema``; a model served by TensorRT-LLM on some pool
(no grammar input rendered there) refuses ``response_format`` with a 400 rather than ignore it.
"""

from __future__ import annotations

from typing import Any

from gateway.errors import InvalidRequestError
from gateway.schemas import ResponseFormat
from settings.engine import uses_trtllm
from settings.stack import ModelSpec, StackConfig

_ANY_OBJECT: dict[str, Any] = {"type": "object"}
# One-line JSON with the usual separators: flexible whitespace let SmolLM2 at temperature 1.0
# pad answers with newlines and indentation until max_tokens cut the object off.
_LAYOUT: Any = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def response_grammar(config: StackConfig, model: ModelSpec, response_format: ResponseFormat | None) -> str:
    """The grammar the output must follow; "" when unconstrained (``text`` or absent)."""
    if response_format is None or response_format.type == "text":
        return ""
    if any(model.name in pool.models and uses_trtllm(model, pool.gpu_type) for pool in config.pools):
        raise InvalidRequestError(f"model {model.name} runs on an engine that cannot constrain its output "
                                  "here; response_format is not supported for it", param="response_format")
    if response_format.type == "json_object":
        schema: dict[str, Any] = _ANY_OBJECT
    else:
        if response_format.json_schema is None or response_format.json_schema.schema_ is None:
            raise InvalidRequestError("response_format of type json_schema needs json_schema.schema",
                                      param="response_format.json_schema")
        schema = response_format.json_schema.schema_
    return _compiled(schema)


def _compiled(schema: dict[str, Any]) -> str:
    import llguidance

    try:
        grammar = llguidance.LLMatcher.grammar_from_json_schema(schema, defaults=_LAYOUT)
        error = llguidance.LLMatcher.validate_grammar(grammar, None)
    except (ValueError, TypeError, RuntimeError) as exc:
        error = str(exc)
    if error:
        raise InvalidRequestError(f"the JSON schema cannot be enforced: {error}",
                                  param="response_format.json_schema.schema")
    return str(grammar)
