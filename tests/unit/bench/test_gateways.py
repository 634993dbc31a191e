import math
from pathlib import Path

import pytest
import yaml

from bench.gateways import (
    CpuSample,
    Window,
    check_targets,
    package_of,
    per_request_ms,
    rotated,
    summarize,
    summarize_profile,
)
from bench.harness import serve_only, write_config
from settings.gateway import load_gateway_settings
from settings.paths import PROJECT_ROOT
from settings.stack import load_stack_config

SHIPPED = PROJECT_ROOT / "config"


def test_cpu_per_request_sums_every_gateway_and_gives_each_ones_share() -> None:
    before = CpuSample(gateways=(1.0, 2.0), redis=0.5, triton=3.0, load_generator=4.0)
    after = CpuSample(gateways=(1.3, 2.1), redis=0.6, triton=3.2, load_generator=4.4)
    ms, shares = per_request_ms(before, after, 1000)
    assert ms["gateways"] == pytest.approx(0.4)
    assert ms["redis"] == pytest.approx(0.1)
    assert ms["triton"] == pytest.approx(0.2)
    assert ms["load_generator"] == pytest.approx(0.4)
    assert shares == pytest.approx((0.75, 0.25))


def test_an_embedded_store_has_no_redis_cost_and_an_idle_window_no_shares() -> None:
    sample = CpuSample(gateways=(1.0,), redis=None, triton=1.0, load_generator=1.0)
    ms, shares = per_request_ms(sample, sample, 0)
    assert "redis" not in ms and ms["gateways"] == 0.0
    assert math.isnan(shares[0])


def _window(variant: str, clients: int, repeat: int, rps: float, p50: float, gateways_ms: float) -> Window:
    return Window(variant, clients, repeat, rps, p50, 2 * p50, 0, int(rps * 8),
                  {"gateways": gateways_ms, "triton": 0.2}, (1.0,))


def test_cells_are_medians_over_repeats_per_variant_and_client_count() -> None:
    windows = [_window("redis x1", 16, r, rps, 1.0 + r, cpu)
               for r, (rps, cpu) in enumerate([(900.0, 0.5), (1000.0, 0.7), (1100.0, 0.6)])]
    windows.append(_window("embedded x1", 16, 0, 1200.0, 0.9, 0.45))
    cells = summarize(windows)
    assert [(c["variant"], c["repeats"]) for c in cells] == [("redis x1", 3), ("embedded x1", 1)]
    assert cells[0]["rps"] == 1000.0 and cells[0]["p50_ms"] == 2.0
    assert cells[0]["cpu_ms_per_request"] == {"gateways": 0.6, "triton": 0.2}


def _windows(cpu: dict[str, float], p50: dict[str, float], repeat: int = 0) -> list[Window]:
    loaded = [_window(v, 16, repeat, 1000.0, 5.0, cpu[v]) for v in cpu]
    return loaded + [_window(v, 1, repeat, 400.0, p50[v], 1.0) for v in p50]


def test_targets_judge_cpu_flatness_added_latency_and_the_cpu_ceiling() -> None:
    met = check_targets(_windows({"embedded x1": 0.35, "redis x1": 0.38, "redis x2": 0.40},
                                 {"embedded x1": 2.0, "redis x1": 2.2, "redis x2": 2.3}))
    assert [t.met for t in met] == [True, True, True]
    missed = check_targets(_windows({"embedded x1": 0.6, "redis x1": 0.7, "redis x2": 0.8},
                                    {"embedded x1": 2.0, "redis x1": 2.5, "redis x2": 2.3}))
    assert [t.met for t in missed] == [False, False, False]
    assert "+14.3%" in missed[0].figure and "+0.500 ms" in missed[1].figure


def test_comparisons_pair_the_windows_of_one_repeat_so_that_slow_phases_cancel() -> None:
    fast = _windows({"embedded x1": 0.3, "redis x1": 0.3, "redis x2": 0.3}, {"embedded x1": 2.0, "redis x1": 2.5}, 0)
    slow = _windows({"embedded x1": 0.3, "redis x1": 0.3, "redis x2": 0.3}, {"embedded x1": 4.0, "redis x1": 4.5}, 1)
    slower = _windows({"embedded x1": 0.3, "redis x1": 0.3, "redis x2": 0.3}, {"embedded x1": 6.0, "redis x1": 2.9}, 2)
    added = check_targets(fast + slow + slower)[1]
    # the cells' medians (redis 2.9 against embedded 4.0) hide it; two of three repeats show +0.5
    assert "+0.500 ms (median of 3 paired repeats)" in added.figure and not added.met


def test_with_half_the_clients_measured_two_gateways_are_also_judged_at_the_same_load_per_process() -> None:
    windows = _windows({"embedded x1": 0.35, "redis x1": 0.30, "redis x2": 0.40},
                       {"embedded x1": 2.0, "redis x1": 2.2, "redis x2": 2.3})
    checks = check_targets([*windows, _window("redis x1", 8, 0, 900.0, 4.0, 0.38)])
    assert [c.met for c in checks] == [False, True, True, True]
    assert "1 at 8 (the same load per gateway process)" in checks[1].what


def test_variants_rotate_so_that_each_leads_in_turn() -> None:
    assert rotated(("a", "b", "c"), 0) == ["a", "b", "c"]
    assert rotated(("a", "b", "c"), 4) == ["b", "c", "a"]


def test_profile_counts_the_leaf_as_self_and_each_function_once_per_stack_as_total() -> None:
    raw = [
        "<module> (gateway/__main__.py:10);run (asyncio/runners.py:44);_run_once (asyncio/base_events.py:1922) 30",
        "<module> (gateway/__main__.py:10);run (asyncio/runners.py:44);"
        "handle (starlette/routing.py:70);handle (starlette/routing.py:74) 10",
        "Thread._bootstrap (threading.py:1002);Thread.run (threading.py:982) 25",
        "not a sample line",
    ]
    summary = summarize_profile(raw)
    assert summary["samples"] == 40  # the main thread's only
    assert summary["self"][0] == {"function": "_run_once (asyncio/base_events.py)", "samples": 30, "share": 0.75}
    totals = {t["function"]: t["samples"] for t in summary["total"]}
    assert totals["handle (starlette/routing.py)"] == 10  # two frames of one stack: counted once
    assert "<module> (gateway/__main__.py)" not in totals  # an entry frame, in every sample
    assert [p["package"] for p in summary["packages"]] == ["asyncio", "starlette"]
    assert summary["other_threads"] == {"Thread.run (threading.py)": 25}


def test_a_frames_package_is_its_top_folder_wherever_python_keeps_it() -> None:
    assert package_of("get (/v/lib/python3.12/site-packages/starlette/datastructures.py:12)") == "starlette"
    assert package_of("select (/usr/lib/python3.12/selectors.py)") == "selectors"
    assert package_of(f"admit ({PROJECT_ROOT}/gateway/admission.py:3)") == "gateway"
    assert package_of("_run_once (asyncio/base_events.py)") == "asyncio"


def test_the_written_config_serves_only_the_chosen_models_with_the_given_store_and_quotas(tmp_path: Path) -> None:
    quotas = {"requests_per_second": 1_000_000, "max_concurrent": 10_000}
    write_config(SHIPPED, tmp_path, 29100, state_store="redis://127.0.0.1:29999/0", models=("tabular",),
                 quotas={"demo-premium": quotas})
    pools = load_stack_config(tmp_path / "pools.yaml", tmp_path / "models.yaml").pools
    assert [pool.models for pool in pools] == [("tabular",)]
    assert load_gateway_settings(tmp_path / "gateway.yaml").state_store == "redis://127.0.0.1:29999/0"
    tenants = {t["name"]: t["quotas"] for t in yaml.safe_load((tmp_path / "tenants.yaml").read_text())["tenants"]}
    assert tenants.pop("demo-premium") == quotas
    assert tenants and all(kept == {} for kept in tenants.values())


def test_the_written_config_keeps_the_projects_gateway_settings_by_default(tmp_path: Path) -> None:
    write_config(SHIPPED, tmp_path, 29100)
    assert load_gateway_settings(tmp_path / "gateway.yaml") == load_gateway_settings(SHIPPED / "gateway.yaml")


def test_serving_only_unknown_models_or_quotas_for_an_unknown_tenant_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no pool serves"):
        serve_only("pools:\n  - models: [chat, embed]\n", ("vision",))
    with pytest.raises(ValueError, match="no tenant"):
        write_config(SHIPPED, tmp_path, 29100, quotas={"nobody": {"max_concurrent": 1}})
