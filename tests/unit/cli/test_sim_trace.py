"""``shunter sim --trace FILE``: a user's trace is simulated; a bad one is refused before anything runs."""

import json
import random
import re
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app


def test_a_users_trace_file_is_simulated(tmp_path: Path) -> None:
    rng, now = random.Random(1), 0.0
    trace = tmp_path / "mine.jsonl"
    with trace.open("w") as out:
        for i in range(80):
            now += rng.expovariate(2.0)
            out.write(json.dumps({"arrival_s": round(now, 3), "prompt_tokens": rng.randint(50, 2000),
                                  "output_tokens": rng.randint(5, 300), "tenant": "a" if i % 2 else "b"}) + "\n")
    result = CliRunner().invoke(app, ["sim", "sweep", "--trace", str(trace), "--loads", "1", "--pool", "h100:1",
                                      "--out", str(tmp_path / "out")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out").is_dir() and any((tmp_path / "out").iterdir())


def test_a_bad_trace_is_a_usage_error_naming_the_line(tmp_path: Path) -> None:
    trace = tmp_path / "bad.csv"
    trace.write_text("arrival_s,prompt_tokens,output_tokens\n0,10,1\n1,-5,1\n")
    result = CliRunner().invoke(app, ["sim", "overload", "--trace", str(trace), "--out", str(tmp_path / "out")])
    assert result.exit_code == 2
    squeezed = re.sub(r"[│\s]+", "", result.output)  # rich wraps the message in a box
    assert "bad.csv:3:prompt_tokensis'-5'" in squeezed
    assert not (tmp_path / "out").exists()
