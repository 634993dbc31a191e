import random

import numpy as np
import pytest

from python_backends.batching import InvalidInputError
from python_backends.chat.params import parse_params


def test_defaults_follow_the_openai_api_and_draw_a_seed() -> None:
    params = parse_params({}, default_max_tokens=64, rng=random.Random(1))
    assert (params.max_tokens, params.temperature, params.top_p, params.top_k) == (64, 1.0, 1.0, 0)
    assert params.seed == random.Random(1).getrandbits(31)


def test_given_values_are_used() -> None:
    inputs = {"max_tokens": np.array([5], np.int32), "temperature": np.array([0.0], np.float32),
              "seed": np.array([42], np.int64), "stop": np.array([b"\n", b"###"], dtype=object)}
    params = parse_params(inputs, 64, random.Random())
    assert (params.max_tokens, params.temperature, params.seed, params.stop) == (5, 0.0, 42, ("\n", "###"))


@pytest.mark.parametrize(("name", "value"), [
    ("max_tokens", np.array([0], np.int32)),
    ("temperature", np.array([3.0], np.float32)),
    ("temperature", np.array([np.nan], np.float32)),
    ("top_p", np.array([0.0], np.float32)),
    ("top_k", np.array([-1], np.int32)),
    ("max_tokens", np.array([1, 2], np.int32)),
])
def test_invalid_values_name_the_input(name: str, value: np.ndarray) -> None:
    with pytest.raises(InvalidInputError, match=name):
        parse_params({name: value}, 64, random.Random())
