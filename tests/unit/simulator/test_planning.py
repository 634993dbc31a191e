from simulator.planning import Evaluation, Targets, plan_pool, served_rps_per_gpu, too_small
from tests.unit.simulator.helpers import arrivals


def _run(mix: dict[str, int], attainment: float) -> Evaluation:
    return Evaluation(mix, 0.0, attainment, None, attainment >= 0.95)


def test_served_rate_per_gpu_is_the_best_single_type_run_and_ignores_mixes() -> None:
    runs = [_run({"a10": 1}, 0.30), _run({"a10": 4}, 0.60), _run({"a100-80": 2}, 1.0),
            _run({"a10": 1, "a100-80": 1}, 1.0)]
    rates = served_rps_per_gpu(runs, offered=10.0)
    assert rates == {"a10": 3.0, "a100-80": 5.0}


def test_a_mix_is_too_small_only_when_every_type_has_an_estimate_and_the_sum_falls_short() -> None:
    rates = {"a10": 3.0, "a100-80": 5.0}
    assert too_small({"a10": 2, "a100-80": 1}, rates, required_rps=11.5)
    assert not too_small({"a10": 2, "a100-80": 1}, rates, required_rps=11.0)
    assert not too_small({"a10": 1, "h100": 1}, rates, required_rps=100.0)  # no estimate for h100


def test_skipping_mixes_too_small_for_the_load_finds_the_same_plan_with_fewer_runs() -> None:
    work = arrivals(600, rate_per_s=60.0)  # needs 3 A100 alone: the cheap small mixes cannot carry it
    options = {"targets": Targets(0.9, 0.9), "types": ("a10", "a100-80"), "max_per_type": 16, "max_evaluations": 40}
    every = plan_pool(work, capacity_slack=0.0, **options)  # type: ignore[arg-type]
    pruned = plan_pool(work, **options)  # type: ignore[arg-type]
    assert every.skipped_too_small == 0
    assert pruned.skipped_too_small > 0
    assert len(pruned.evaluations) < len(every.evaluations)
    assert (pruned.best_mix and pruned.best_mix.mix) == (every.best_mix and every.best_mix.mix)
    assert pruned.best_single == every.best_single
