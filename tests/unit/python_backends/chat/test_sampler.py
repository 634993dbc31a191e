import numpy as np

from python_backends.chat.params import GenerationParams
from python_backends.chat.sampler import TokenSampler

ROW = np.array([0.0, 3.0, 2.9, -1.0, 1.0], dtype=np.float32)


def _draws(params: GenerationParams, n: int = 200) -> list[int]:
    sampler = TokenSampler(params)
    return [sampler.sample(ROW) for _ in range(n)]


def test_temperature_zero_is_argmax() -> None:
    assert set(_draws(GenerationParams(max_tokens=1, temperature=0.0), 5)) == {1}


def test_same_seed_same_draws_and_other_seed_other_draws() -> None:
    params = GenerationParams(max_tokens=1, temperature=1.0, seed=7)
    assert _draws(params) == _draws(params)
    assert _draws(params) != _draws(GenerationParams(max_tokens=1, temperature=1.0, seed=8))


def test_top_k_and_top_p_keep_only_the_likeliest_tokens() -> None:
    assert set(_draws(GenerationParams(max_tokens=1, temperature=1.0, top_k=2))) == {1, 2}
    assert set(_draws(GenerationParams(max_tokens=1, temperature=1.0, top_p=0.5))) <= {1, 2}
    assert len(set(_draws(GenerationParams(max_tokens=1, temperature=1.0)))) >= 4


def test_a_sampler_that_skips_n_draws_continues_the_seeded_sequence() -> None:
    params = GenerationParams(max_tokens=1, temperature=1.0, top_p=0.9, seed=11)
    whole = _draws(params, 50)
    resumed = TokenSampler(params)
    resumed.skip(20)
    assert [resumed.sample(ROW) for _ in range(30)] == whole[20:]
