from collections.abc import Sequence

import numpy as np

from python_backends.batching import InvalidInputError, Tensors, decode_texts, run_batch


class Doubler:
    """A pure handler for the contract test: doubles ``x``; negative values are invalid."""

    def __init__(self) -> None:
        self.batches: list[int] = []

    def prepare(self, inputs: Tensors) -> np.ndarray:
        if (inputs["x"] < 0).any():
            raise InvalidInputError("x", "must be non-negative")
        return inputs["x"]

    def infer(self, prepared: Sequence[np.ndarray]) -> list[Tensors]:
        self.batches.append(len(prepared))
        return [{"y": p * 2} for p in prepared]


def test_an_invalid_request_fails_alone_and_the_rest_run_in_one_batch() -> None:
    handler = Doubler()
    results = run_batch(handler, [{"x": np.array([1])}, {"x": np.array([-1])}, {"x": np.array([3])}])
    assert isinstance(results[1], InvalidInputError)
    assert results[0]["y"].tolist() == [2] and results[2]["y"].tolist() == [6]  # type: ignore[index]
    assert handler.batches == [2]


def test_all_invalid_runs_nothing() -> None:
    handler = Doubler()
    assert all(isinstance(r, InvalidInputError) for r in run_batch(handler, [{"x": np.array([-1])}]))
    assert handler.batches == []


def test_decode_texts_rejects_invalid_utf8_naming_the_input() -> None:
    try:
        decode_texts({"text": np.array([[b"\xff\xfe"]], dtype=object)}, "text")
    except InvalidInputError as exc:
        assert exc.input_name == "text"
    else:
        raise AssertionError("expected InvalidInputError")
