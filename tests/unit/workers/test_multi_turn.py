"""Pure parts of --multi-turn: laying conversations out, a worker's turn bookkeeping and body
splicing, a later turn's intended instant, the per-turn report and the flags."""

from __future__ import annotations

import numpy as np
import orjson
import pytest
from helpers import config_given

from loadgen.config import ConfigError
from loadgen.datasets.conversations import (
    Turns,
    sharegpt_conversations,
    think_times_ns,
    turn_counts,
)
from loadgen.payloads import turn_bodies
from loadgen.records.event_source import ArrayEvents
from loadgen.records.turns import intended_ns
from loadgen.report.conversations import conversation_figures, conversation_lines
from loadgen.report.metrics import Timings
from workers.conversations import Conversations, split_turn_body
from workers.protocol import RECORD_DTYPE, UNSENT_ROW

CHAT = {"backend": "openai-chat", "endpoint": "/v1/chat/completions"}

# --- laying conversations out ----------------------------------------------------------------


def test_turns_are_laid_out_conversation_by_conversation() -> None:
    turns = Turns.of([2, 3, 1], np.full(6, 7))
    assert turns.conversation.tolist() == [0, 0, 1, 1, 1, 2]
    assert turns.turn.tolist() == [0, 1, 0, 1, 2, 0]
    assert turns.think_ns.tolist() == [0, 7, 0, 7, 7, 0]  # no think time before a first turn
    assert turns.num_conversations == 3
    assert turns.frame(np.array([4, 5])).tolist() == [[1, 2, 7], [2, 0, 0]]


def test_turn_counts_and_think_times_are_seeded() -> None:
    assert turn_counts(4, 3, 3, seed=1).tolist() == [3, 3, 3, 3]
    drawn = turn_counts(200, 2, 5, seed=1)
    assert drawn.min() == 2 and drawn.max() == 5
    assert (drawn == turn_counts(200, 2, 5, seed=1)).all()
    assert think_times_ns(3, 0.0, "fixed", 0).tolist() == [0, 0, 0]
    assert think_times_ns(2, 1.5, "fixed", 0).tolist() == [1_500_000, 1_500_000]
    sampled = think_times_ns(20_000, 10.0, "exponential", 0)
    assert abs(sampled.mean() / 1e6 - 10.0) < 0.5 and (sampled >= 0).all()


def test_sharegpt_conversations_keep_every_human_turn(tok) -> None:
    def entry(turns: int, first: str = "human") -> dict:
        messages = []
        for t in range(turns):
            messages += [{"from": first, "value": f"q{t} " * 4}, {"from": "gpt", "value": "a " * 9}]
        return {"conversations": messages}

    entries = [entry(3), entry(1), entry(2), entry(2, first="gpt")]  # 1 pair, or no human: out
    sampled, turns = sharegpt_conversations(entries, tok, 5, max_turns=0, output_len=None, seed=0)
    assert sorted(np.bincount(turns.conversation).tolist()) == [2, 3]
    assert all(p.startswith("q") for p in sampled.prompts)
    capped = sharegpt_conversations(entries, tok, 5, max_turns=2, output_len=7, seed=0)
    assert np.bincount(capped[1].conversation).tolist() == [2, 2]
    assert set(capped[0].output_lens.tolist()) == {7}
    with pytest.raises(ValueError, match="two human/assistant pairs"):
        sharegpt_conversations([entry(1)], tok, 5, 0, None, 0)


# --- a turn's body and a worker's bookkeeping ------------------------------------------------


def bodies() -> list[bytes]:
    return turn_bodies(
        ["m"] * 3, ["hello", 'say "hi"', "bye"], [4, 4, 4],
        ignore_eos=False, extra_body={"temperature": 0}, min_tokens=True,
    )  # fmt: skip


def test_a_turn_body_is_spliced_with_the_history_and_no_json_is_parsed() -> None:
    body = bodies()[1]
    head, user, tail = split_turn_body(body)
    assert orjson.loads(head + user + tail)["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": 'say "hi"'}]}
    ]
    conversations = Conversations(
        np.array([0, 0, 0]), np.array([0, 1, 2]), np.array([0, 5, 5]), np.zeros(3, np.int64), "p-"
    )
    assert conversations.pop() == 0 and conversations.next_due_ns() is None
    assert conversations.ended(0, bodies()[0], True, 'I said "hello"\n', end_ns=100) == []
    assert conversations.next_due_ns() == 105  # its end plus the think time
    assert conversations.pop() == 1
    sent = orjson.loads(conversations.body(1, body))
    assert [m["role"] for m in sent["messages"]] == ["user", "assistant", "user"]
    assert sent["messages"][1]["content"] == 'I said "hello"\n'
    assert sent["min_tokens"] == 4 and sent["temperature"] == 0
    assert conversations.session(1) == "p-conv-0"


def test_a_failed_turn_ends_its_conversation() -> None:
    conversations = Conversations(
        np.array([0, 0, 0, 1]), np.array([0, 1, 2, 0]), np.zeros(4, np.int64),
        np.array([0, 0, 0, 50]), "",
    )  # fmt: skip
    assert conversations.pop() == 0
    assert conversations.due_count(now_ns=60) == 1  # conversation 1's first turn
    assert conversations.ended(0, bodies()[0], False, "", end_ns=10) == [1, 2]
    assert conversations.pending == 1
    assert conversations.never_released() == [3]


def test_a_later_turns_intended_instant_is_the_turn_before_s_end_plus_think() -> None:
    scheduled = np.array([0, 0, 0, 40])
    end = np.array([10, 30, -1, 90])
    turn = np.array([0, 1, 2, 0])
    think = np.array([0, 5, 5, 0])
    assert intended_ns(scheduled, end, turn, think).tolist() == [0, 15, 35, 40]
    unsent_before = intended_ns(scheduled, np.array([-1, -1, -1, 90]), turn, think)
    assert unsent_before.tolist() == [0, 0, 0, 40]


# --- the report ------------------------------------------------------------------------------


def test_each_turn_index_and_each_conversation_has_its_figures() -> None:
    from loadgen.records.model import RunRecords

    records = np.zeros(5, dtype=RECORD_DTYPE)
    records["success"] = [1, 1, 1, 0, 1]
    records["sent_ns"] = [0, 100, 0, 200, 0]
    records["end_ns"] = [50, 180, 60, 210, 40]
    records["prompt_tokens"] = [10, 30, 12, -1, 9]
    records[3] = np.array(UNSENT_ROW, dtype=RECORD_DTYPE)
    records["success"][3] = 0
    run = RunRecords.__new__(RunRecords)
    run.records = records
    run.errors = {3: "not sent: an earlier turn of this conversation failed (turn 0: x)"}
    run.conversation = np.array([0, 0, 1, 1, 2])
    run.turn = np.array([0, 1, 0, 1, 0])
    timings = Timings(
        np.array([0.001, 0.002, 0.001, 0.0, 0.003]), np.array([0.05, 0.08, 0.06, 0, 0.04]),
        np.zeros(5), np.zeros(6, np.int64), ArrayEvents(np.zeros(0), np.zeros(6, np.int64)),
    )  # fmt: skip
    figures = conversation_figures(run, timings)
    assert figures is not None
    assert (figures["conversations"], figures["completed"], figures["failed"]) == (3, 2, 1)
    first, second = figures["per_turn"]
    assert (first["completed"], first["failed"], second["completed"], second["failed"]) == (
        3, 0, 1, 0,
    )  # fmt: skip
    assert second["not_sent"] == 1 and second["mean_input_tokens"] == 30
    assert first["ttft_ms"]["p50"] == pytest.approx(1.0)
    assert figures["duration_s"]["p50"] == pytest.approx(110e-9)  # of 180 - 0 and 40 - 0 ns
    lines = conversation_lines(figures)
    assert "Conversations completed/total:" in lines[1] and "2/3" in lines[1]
    assert conversation_lines(None) == []


def test_a_turn_that_no_conversation_completed_has_no_figures() -> None:
    from loadgen.records.model import RunRecords

    records = np.zeros(2, dtype=RECORD_DTYPE)
    records["success"] = [1, 0]  # the second turn failed: no conversation is whole
    records["sent_ns"], records["end_ns"], records["prompt_tokens"] = [0, 100], [50, 150], 10
    run = RunRecords.__new__(RunRecords)
    run.records, run.conversation, run.turn = records, np.array([0, 0]), np.array([0, 1])
    run.errors = {1: "HTTP 500 Internal Server Error: x"}
    timings = Timings(
        np.array([0.001, 0.0]), np.array([0.05, 0.0]), np.zeros(2), np.zeros(3, np.int64),
        ArrayEvents(np.zeros(0), np.zeros(3, np.int64)),
    )  # fmt: skip
    figures = conversation_figures(run, timings)
    assert figures is not None and (figures["completed"], figures["failed"]) == (0, 1)
    empty = {"mean": None, "p50": None, "p99": None}
    assert figures["per_turn"][1]["ttft_ms"] == figures["per_turn"][1]["e2el_ms"] == empty
    assert figures["duration_s"] == empty
    assert conversation_lines(figures)  # printed all the same


# --- the flags -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"multi_turn": True}, "--backend openai-chat"),
        ({"multi_turn_delay_ms": 5.0}, "give it with --multi-turn"),
        ({**CHAT, "multi_turn": True, "dataset_name": "prefix_repetition"}, "random or sharegpt"),
        (
            {**CHAT, "multi_turn": True, "multi_turn_min_turns": 5, "multi_turn_max_turns": 2},
            "above --multi-turn-max-turns",
        ),
        ({**CHAT, "multi_turn": True, "num_runs": 2}, "runs one run"),
    ],
)
def test_multi_turn_flags_that_cannot_work_exit_2(fields: dict, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        config_given(mock=True, **fields).validate()


def test_multi_turn_concurrency_is_the_cap_and_not_given_twice() -> None:
    config = config_given(mock=True, multi_turn=True, multi_turn_concurrency=8, **CHAT)
    config.validate()
    assert config.max_concurrency == 8
    both = config_given(
        mock=True, multi_turn=True, multi_turn_concurrency=8, max_concurrency=4, **CHAT
    )
    with pytest.raises(ConfigError, match="give one"):
        both.validate()
