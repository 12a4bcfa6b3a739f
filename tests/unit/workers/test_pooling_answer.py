"""How a worker reads a pooling answer: one instant, and usage.prompt_tokens without parsing
the vectors."""

from __future__ import annotations

import orjson

from workers.pooling import (
    JSON_BODY,
    METADATA_HEADER,
    NO_USAGE,
    PooledAnswer,
    prompt_tokens_of_body,
)


def embeddings_answer(usage: object) -> bytes:
    body = {
        "id": "embd-1",
        "object": "list",
        "data": [{"index": 0, "object": "embedding", "embedding": [0.5, -0.25] * 500}],
    }
    if usage is not None:
        body["usage"] = usage
    return orjson.dumps(body)


def test_prompt_tokens_are_read_from_the_usage_object() -> None:
    usage = {"prompt_tokens": 37, "total_tokens": 37, "completion_tokens": 0}
    assert prompt_tokens_of_body(embeddings_answer(usage)) == 37
    spaced = b'{"data": [], "usage": {"total_tokens": 5, "prompt_tokens" : 5}}'
    assert prompt_tokens_of_body(spaced) == 5


def test_an_answer_without_usage_counts_zero_prompt_tokens_as_upstream() -> None:
    assert prompt_tokens_of_body(embeddings_answer(None)) == 0
    assert prompt_tokens_of_body(embeddings_answer({"total_tokens": 4})) == 0
    assert prompt_tokens_of_body(b'{"data": [], "usage": null}') == 0


def test_a_json_answer_is_one_event_at_the_instant_it_was_read() -> None:
    answer = PooledAnswer()
    answer.read(JSON_BODY, embeddings_answer({"prompt_tokens": 9}), {}, now_ns=1234)
    assert list(answer.event_ns) == [1234]
    assert (answer.prompt_tokens, answer.completion_tokens, answer.error) == (9, -1, None)


def test_a_200_that_is_not_json_fails_the_request() -> None:
    answer = PooledAnswer()
    answer.read(JSON_BODY, b"<html>gateway</html>", {}, now_ns=1)
    assert len(answer.event_ns) == 0
    assert answer.error is not None and "not a JSON object" in answer.error


def test_bytes_answers_take_usage_from_the_metadata_header() -> None:
    answer = PooledAnswer()
    metadata = orjson.dumps({"usage": {"prompt_tokens": 12}}).decode()
    answer.read(METADATA_HEADER, b"\x00" * 64, {"metadata": metadata}, now_ns=5)
    assert (list(answer.event_ns), answer.prompt_tokens) == ([5], 12)

    missing = PooledAnswer()
    missing.read(METADATA_HEADER, b"\x00" * 64, {}, now_ns=5)
    assert missing.error == "encoding_format bytes: the answer has no metadata header"
    assert len(missing.event_ns) == 0

    unreadable = PooledAnswer()
    unreadable.read(METADATA_HEADER, b"", {"metadata": "[1, 2]"}, now_ns=5)
    assert unreadable.error is not None and "unreadable metadata header" in unreadable.error


def test_bytes_only_answers_leave_the_prompt_length_to_the_dataset() -> None:
    answer = PooledAnswer()
    answer.read(NO_USAGE, b"\x00" * 64, {}, now_ns=7)
    assert (list(answer.event_ns), answer.prompt_tokens, answer.error) == ([7], -1, None)
