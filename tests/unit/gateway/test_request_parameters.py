"""Every parameter of the official SDK's request types is honoured or refused by name, never ignored."""

from __future__ import annotations

import pytest
from openai.types import completion_create_params as completion_params
from openai.types.chat import completion_create_params as chat_params

from gateway.request_parameters import NO_OP_VALUES
from gateway.schemas import ChatCompletionRequest, CompletionRequest
from tests.unit.gateway.conftest import STANDARD, InProcessGateway

CHAT = {"model": "chat", "messages": [{"role": "user", "content": "Hi"}]}
COMPLETION = {"model": "chat", "prompt": "Hi"}
SDK_CHAT = sorted(chat_params.CompletionCreateParamsBase.__annotations__)
SDK_COMPLETION = sorted(completion_params.CompletionCreateParamsBase.__annotations__)


def _declared(model: type[ChatCompletionRequest] | type[CompletionRequest]) -> set[str]:
    return {field.alias or name for name, field in model.model_fields.items()}


@pytest.mark.parametrize("name", sorted(set(SDK_CHAT) - _declared(ChatCompletionRequest)))
async def test_an_undeclared_chat_parameter_is_refused_by_name(gw: InProcessGateway, name: str) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, name: "some-value"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == name
    assert response.json()["error"]["code"] == "unsupported_parameter"
    assert not gw.workers.generations


@pytest.mark.parametrize("name", sorted(set(SDK_COMPLETION) - _declared(CompletionRequest)))
async def test_an_undeclared_completion_parameter_is_refused_by_name(gw: InProcessGateway, name: str) -> None:
    response = await gw.client.post("/v1/completions", headers=STANDARD, json={**COMPLETION, name: "some-value"})
    assert response.status_code == 400
    assert response.json()["error"]["param"] == name


async def test_a_parameter_no_sdk_knows_is_refused_too(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "mirostat": 2})
    assert response.status_code == 400 and response.json()["error"]["param"] == "mirostat"


async def test_no_op_values_and_nulls_are_accepted(gw: InProcessGateway) -> None:
    no_ops = {name: values[0] for name, values in NO_OP_VALUES.items()}
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD,
                                    json={**CHAT, **no_ops, "audio": None, "prediction": None})
    assert response.status_code == 200, response.text


async def test_a_penalty_that_asks_for_something_is_refused(gw: InProcessGateway) -> None:
    response = await gw.client.post("/v1/chat/completions", headers=STANDARD, json={**CHAT, "presence_penalty": 0.5})
    assert response.status_code == 400 and response.json()["error"]["param"] == "presence_penalty"
