import json
from pathlib import Path

from bench.studies.fidelity_report import row, versus_row


def _entry(p50: float, p99: float, real: tuple[float, float] = (0.5, 10.0)) -> dict[str, object]:
    return {"real_p50_s": real[0], "real_p99_s": real[1], "sim_p50_s": p50, "sim_p99_s": p99,
            "p50_error": p50 / real[0] - 1, "p99_error": p99 / real[1] - 1,
            "within_25_percent": abs(p50 / real[0] - 1) <= 0.25 and abs(p99 / real[1] - 1) <= 0.25}


def _folder(tmp_path: Path) -> Path:
    folder = tmp_path / "fidelity_real_run7"
    folder.mkdir()
    (folder / "scheduling.yaml").write_text("capacity_profiles:\n  cpu: {prefill_tokens_per_s: 320}\n")
    headline = {"all": _entry(0.3, 6.0), "host_calibrated": {"time_scale": 1.3},
                "host_timed": {**_entry(0.55, 11.0), "window_scales": [[10.0, 1.2], [20.0, 1.6]]}}
    requests = [{"real_ttft_s": 1.0, "sim_host_timed_ttft_s": ratio} for ratio in (0.7, 1.0, 1.1, 1.2)]
    (folder / "fidelity_real.json").write_text(json.dumps({"headline": headline, "requests": requests}))
    other = {"headline": {"host_timed": _entry(0.5, 11.0)}}
    (folder / "other.json").write_text(json.dumps(other))
    return folder


def test_a_row_shows_the_profile_and_the_host_timed_simulation_of_one_replay(tmp_path: Path) -> None:
    cells = [c.strip() for c in row(_folder(tmp_path)).strip("|").split("|")]
    assert cells == ["7", "320", "0.500 / 10.00", "0.300 / 6.00, -40.0 / -40.0 %", "1.30; 1.20-1.60",
                     "0.550 / 11.00, +10.0 / +10.0 %", "no / yes", "1.05, 3 of 4"]


def test_two_simulations_of_a_replay_are_set_side_by_side(tmp_path: Path) -> None:
    line = versus_row(_folder(tmp_path), "fidelity_real.json", "other.json")
    assert line == "| 7 | 0.550 / 11.00 | 0.500 / 11.00 | 1.100 / 1.000 |"
