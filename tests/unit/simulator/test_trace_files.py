"""Trace files: the three formats detected and read, and every kind of bad file refused by line."""

import itertools
from pathlib import Path

import pytest

from simulator.trace_files import TraceFormatError, detect_format, read_trace
from simulator.workloads import DEFAULT_TRACES_DIR


def test_the_shipped_azure_trace_is_detected_and_read_in_arrival_order() -> None:
    path = DEFAULT_TRACES_DIR / "AzureLLMInferenceTrace_conv.csv"
    assert detect_format(path) == "azure"
    records = read_trace(path)
    assert len(records) == 19_366 and records[0].arrival_s == 0.0
    assert all(a.arrival_s <= b.arrival_s for a, b in itertools.pairwise(records))
    assert (records[0].prompt_tokens, records[0].output_tokens) == (374, 44)


def test_shunter_jsonl_and_csv_carry_tenants_and_prefix_blocks(tmp_path: Path) -> None:
    jsonl = tmp_path / "t.jsonl"
    jsonl.write_text('{"arrival_s": 2.5, "prompt_tokens": 40, "output_tokens": 7, "tenant": "acme", "tier": "premium",'
                     ' "prefix_blocks": [11, 12]}\n\n{"arrival_s": 1.0, "prompt_tokens": 3, "output_tokens": 0}\n')
    first, second = read_trace(jsonl)
    assert (first.arrival_s, first.prompt_tokens, first.tenant) == (0.0, 3, None)
    assert (second.arrival_s, second.tenant, second.tier, second.prefix_blocks) == (1.5, "acme", "premium", (11, 12))
    assert second.item.output_tokens == 7 and first.item.output_tokens == 1
    table = tmp_path / "t.csv"
    table.write_text("arrival_s,prompt_tokens,output_tokens,model,prefix_blocks,block_tokens\n0,32,4,chat,5 6,16\n")
    (only,) = read_trace(table)
    assert (only.model, only.prefix_blocks, only.block_tokens) == ("chat", (5, 6), 16)


def test_mooncake_lines_are_milliseconds_and_512_token_blocks(tmp_path: Path) -> None:
    path = tmp_path / "m.jsonl"
    path.write_text('{"timestamp": 1500, "input_length": 1024, "output_length": 9, "hash_ids": [0, 1]}\n'
                    '{"timestamp": 500, "input_length": 600, "output_length": 3, "hash_ids": [0]}\n')
    assert detect_format(path) == "mooncake"
    first, second = read_trace(path)
    assert (first.arrival_s, second.arrival_s, second.prefix_blocks, second.block_tokens) == (0.0, 1.0, (0, 1), 512)


@pytest.mark.parametrize(("text", "message"), [
    ("a,b,c\n1,2,3\n", "matches no trace format"),
    ('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_s": -1, "prompt_tokens": 5, '
     '"output_tokens": 1}\n', r":2: arrival_s is -1"),
    ('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\n{"arrival_s": 1, "output_tokens": 1}\n',
     r":2: column 'prompt_tokens' is missing"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5,1\n1,five,1\n", r":3: could not convert"),
    ("arrival_s,prompt_tokens,output_tokens\n0,5.5,1\n", r":2: prompt_tokens is '5.5': a whole number"),
    ('{"arrival_s": 0, "prompt_tokens": 5, "output_tokens": 1}\nnot json\n', r":2: not a JSON object"),
    ("arrival_s,prompt_tokens,output_tokens\n", "no requests"),
])
def test_a_bad_file_names_the_file_the_line_and_the_columns(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.trace"
    path.write_text(text)
    with pytest.raises(TraceFormatError, match=message) as refused:
        read_trace(path)
    assert str(path) in str(refused.value)
