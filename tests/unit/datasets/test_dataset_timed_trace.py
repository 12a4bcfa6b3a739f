"""vLLM's ``timed_trace`` dataset: token-id prompts from hash ids, and the trace's own instants."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from loadgen.datasets.timed_trace import chunk_seed, load_trace, sample_timed_trace_requests

LABELS = {
    "timestamp": "timestamp",
    "input_length": "input_length",
    "output_length": "output_length",
    "hash_ids": "hash_ids",
}


def write_trace(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    return str(path)


def test_shared_hash_ids_give_shared_prefixes_of_the_input_length(tok, tmp_path):
    rows = [
        {"timestamp": 0, "input_length": 40, "output_length": 7, "hash_ids": [1, 2, 3]},
        {"timestamp": 2, "input_length": 20, "output_length": 3, "hash_ids": [1, 9]},
        {"timestamp": 1, "input_length": 16, "output_length": 5, "hash_ids": [1, 2, 3]},
    ]
    trace = load_trace(write_trace(tmp_path / "t.jsonl", rows), 10)
    ds, offsets = sample_timed_trace_requests(trace, tok, 16, 0.5, LABELS)
    first, second, third = ds.prompts
    assert [len(p) for p in ds.prompts] == [40, 20, 16]  # 16 + 16 + the last 8, ...
    assert ds.prompt_lens.tolist() == [40, 20, 16]
    assert ds.output_lens.tolist() == [7, 3, 5]
    assert first[:16] == second[:16] == third  # hash 1 is the same 16 tokens everywhere
    assert first[16:32] != second[16:20]  # hash 2 and hash 9 differ
    assert all(0 <= t < tok.vocab_size and t not in tok.special_ids for t in first)
    # Timestamps x 0.5, and a timestamp earlier than the one before goes right after it.
    assert offsets.tolist() == [0.0, 1.0, 1.0]
    again, _ = sample_timed_trace_requests(trace, tok, 16, 0.5, LABELS)
    assert again.prompts == ds.prompts  # stable across runs, unlike upstream's salted hash()
    assert chunk_seed(1, 16) == chunk_seed("1", 16) != chunk_seed(1, 8)


def test_lines_beyond_num_prompts_are_not_read_and_labels_rename_fields(tok, tmp_path):
    rows = [{"ts": i, "in": 8, "out": 2, "h": [i]} for i in range(5)]
    trace = load_trace(write_trace(tmp_path / "t.jsonl", rows), 3)
    labels = {"timestamp": "ts", "input_length": "in", "output_length": "out", "hash_ids": "h"}
    ds, offsets = sample_timed_trace_requests(trace, tok, 4, 1.0, labels)
    assert len(ds.prompts) == 3 and offsets.tolist() == [0.0, 1.0, 2.0]
    assert [len(p) for p in ds.prompts] == [4, 4, 4]  # one hash id of 4 tokens each


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            {"timestamp": 0, "output_length": 2, "hash_ids": [1]},
            r"t.jsonl:1: no number in field 'input_length' \(--timed-trace-label-input-length",
        ),
        (
            {"timestamp": 0, "input_length": 4, "output_length": 2, "hash_ids": []},
            r"t.jsonl:1: no prompt tokens \(input length 4, 0 hash ids in 'hash_ids'\)",
        ),
        (
            {"timestamp": "x", "input_length": 4, "output_length": 2, "hash_ids": [1]},
            r"no number in field 'timestamp' \(--timed-trace-label-timestamp names it\)",
        ),
    ],
)
def test_bad_lines_are_named(tok, tmp_path, row, message):
    path = write_trace(tmp_path / "t.jsonl", [row])
    with pytest.raises(ValueError, match=message):
        sample_timed_trace_requests(load_trace(path, 5), tok, 16, 1.0, LABELS, path)


def test_an_empty_or_broken_trace_is_refused(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="the trace has no requests"):
        load_trace(str(tmp_path / "empty.jsonl"), 5)
    (tmp_path / "bad.jsonl").write_text('{"timestamp": 0}\n{oops\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:2: not valid JSON"):
        load_trace(str(tmp_path / "bad.jsonl"), 5)


def test_offsets_never_go_below_zero(tok, tmp_path):
    rows = [{"timestamp": -3, "input_length": 4, "output_length": 1, "hash_ids": [1]}]
    _, offsets = sample_timed_trace_requests(
        load_trace(write_trace(tmp_path / "t.jsonl", rows), 5), tok, 16, 1.0, LABELS
    )
    np.testing.assert_array_equal(offsets, [0.0])
