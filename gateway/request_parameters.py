"""Which OpenAI request parameters the gateway honours, and the refusal of every other one.

A parameter is either honoured (declared on the body model in ``gateway/schemas.py``), taken only
at its no-op value (``NO_OP_VALUES``: the value that asks for nothing, e.g.
``frequency_penalty: 0``), or refused with a 400 ``unsupported_parameter`` naming it. JSON
``null`` counts as absent. Nothing is silently ignored: a parameter this gateway has never heard
of is refused too (``tests/unit/gateway/test_request_parameters.py`` holds the list against the
official SDK's request types).

Declared parameters whose value the engine cannot serve are refused by the routes
(``check_unsupported`` in ``gateway/routes/generation.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel

from gateway.errors import InvalidRequestError

NO_OP_VALUES: Mapping[str, tuple[Any, ...]] = {
    "frequency_penalty": (0, 0.0),
    "presence_penalty": (0, 0.0),
    "logit_bias": ({},),
    "store": (False,),
    "metadata": ({},),
    "service_tier": ("auto", "default"),
    "modalities": (["text"],),
    "best_of": (1,),
}


def _is_no_op(name: str, value: Any) -> bool:
    if value is None:
        return True
    return any(type(value) is type(neutral) and value == neutral for neutral in NO_OP_VALUES.get(name, ()))


def check_parameters(body: BaseModel) -> None:
    """Raise ``InvalidRequestError`` (code ``unsupported_parameter``) for the first parameter of
    ``body`` that its model does not declare and that is neither null nor its no-op value."""
    for name, value in (body.model_extra or {}).items():
        if not _is_no_op(name, value):
            raise InvalidRequestError(f"the parameter '{name}' is not supported by this gateway", param=name,
                                      code="unsupported_parameter")
