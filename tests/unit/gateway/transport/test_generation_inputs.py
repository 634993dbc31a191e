from gateway.transport.protocol import GenerationRequest
from gateway.transport.triton.generation import build_inputs, engine_priority
from scheduling.tenants import Tier


def test_premium_gets_the_highest_engine_priority() -> None:
    levels = [engine_priority(tier.triton_priority) for tier in (Tier.PREMIUM, Tier.STANDARD, Tier.BATCH)]
    assert levels == sorted(levels, reverse=True)
    assert len(set(levels)) == 3
    assert engine_priority(0) is None


def test_priority_input_is_sent_as_int32() -> None:
    request = GenerationRequest(prompt="hi", prompt_tokens=1, max_tokens=4, priority=Tier.PREMIUM.triton_priority)
    inputs = {i.name(): i for i in build_inputs(request)}
    assert inputs["priority"].datatype() == "INT32"
    unprioritized = GenerationRequest(prompt="hi", prompt_tokens=1, max_tokens=4)
    assert "priority" not in {i.name() for i in build_inputs(unprioritized)}


def test_a_continuation_is_sent_as_int32_token_ids_and_only_when_there_is_one() -> None:
    resumed = GenerationRequest(prompt="hi", prompt_tokens=1, max_tokens=8, continuation=(5, 6, 7))
    inputs = {i.name(): i for i in build_inputs(resumed)}
    assert inputs["continuation"].datatype() == "INT32" and inputs["continuation"].shape() == [3]
    assert "continuation" not in {i.name() for i in build_inputs(GenerationRequest("hi", 1, 8))}
