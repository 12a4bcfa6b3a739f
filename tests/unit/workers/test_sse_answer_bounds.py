"""No answer can exhaust memory, and success means success (issue 27, points 4 and 5): an SSE
event over MAX_EVENT_BYTES fails the request however its bytes arrive, the kept text of a
request is cut to its cap and says so, and data events that only look like JSON objects (they
hold ``"choices":[{``) fail the request instead of counting as tokens."""

from __future__ import annotations

import orjson
import pytest

from workers.sse import MAX_EVENT_BYTES, SPECULATE_PARSE_MAX, EventTooLarge, SSEStream
from workers.stream_text import (
    TEXT_CAP_NO_GUARD,
    TEXT_CHARS_PER_EVENT,
    generated_text,
    kept_text,
    text_cap,
)

DONE = b"data: [DONE]\n\n"


def event(text: str) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "text": text}]}) + b"\n\n"


def chat_event(content: str) -> bytes:
    return b"data: " + orjson.dumps({"choices": [{"index": 0, "delta": {"content": content}}]})


def feed(stream: SSEStream, body: bytes, size: int) -> None:
    for at in range(0, len(body), size):
        stream.feed(body[at : at + size], at)


# --- MAX_EVENT_BYTES -------------------------------------------------------------------------

LIMIT = 4 * SPECULATE_PARSE_MAX  # a small bound: the rule is the same at 16 MiB


@pytest.mark.parametrize("size", [4096, 1000, LIMIT + 10_000])
def test_an_event_over_the_bound_fails_however_it_is_split(size: int):
    body = event("a") + event("x" * (LIMIT + 100)) + DONE
    stream = SSEStream(max_event_bytes=LIMIT)
    with pytest.raises(EventTooLarge, match="longer than 262144 bytes"):
        feed(stream, body, size)
    assert stream.chunks == [] and stream._pending == []  # its bytes are let go


def test_an_unended_line_fails_at_the_bound_not_at_its_end():
    # One 100 MB line at the default bound: it fails after 16 MiB, not after 100 MB.
    piece = b"x" * 2**20
    stream = SSEStream()
    stream.feed(b'data: {"choices":[{"text":"', 0)
    fed = 0
    with pytest.raises(EventTooLarge, match=r"longer than 16 MiB \(MAX_EVENT_BYTES\)"):
        while fed < 100 * 2**20:
            stream.feed(piece, fed)
            fed += len(piece)
    assert MAX_EVENT_BYTES - len(piece) <= fed <= MAX_EVENT_BYTES


def test_an_event_at_the_bound_is_read():
    text = "x" * (LIMIT - 200)
    body = event("a") + event(text) + DONE
    for size in (4096, len(body)):
        stream = SSEStream(max_event_bytes=LIMIT)
        feed(stream, body, size)
        stream.finish(len(body))
        assert stream.failure is None and len(stream.event_ns) == 2 and stream.done
        assert generated_text(stream.chunks, False, stream.choice_events) == "a" + text


def test_a_body_that_is_not_sse_is_bounded_too():
    stream = SSEStream(max_event_bytes=LIMIT)
    with pytest.raises(EventTooLarge, match="a body that is not SSE"):
        feed(stream, b'{"choices":[{"text":"' + b"x" * 2 * LIMIT, 4096)


def test_many_small_events_in_one_large_read_are_not_too_large():
    body = event("ab") * (2 * LIMIT // len(event("ab"))) + DONE
    stream = SSEStream(max_event_bytes=LIMIT)
    stream.feed(body, 1)
    stream.finish(2)
    assert stream.failure is None and stream.done


# --- the kept text's cap -----------------------------------------------------------------------


def test_text_cap_is_per_guard_event_or_one_mib():
    assert TEXT_CHARS_PER_EVENT == 64 and TEXT_CAP_NO_GUARD == 2**20
    assert text_cap(0) == 2**20
    assert text_cap(2 * 128 + 64) == 320 * 64


def test_kept_text_is_cut_to_the_cap_and_says_so():
    body = event("é" * 5000) + DONE  # characters, not bytes, are counted
    stream = SSEStream()
    stream.feed(body, 1)
    stream.finish(2)
    text, capped = kept_text(stream.chunks, False, stream.choice_events, text_cap(72))
    assert capped and text == "é" * (72 * 64)
    text, capped = kept_text(stream.chunks, False, stream.choice_events, 5000)
    assert not capped and text == "é" * 5000


def test_chat_text_is_capped_too():
    body = b"".join(chat_event("abcd") + b"\n\n" for _ in range(100)) + DONE
    stream = SSEStream(chat=True)
    feed(stream, body, 300)
    stream.finish(len(body))
    assert len(stream.event_ns) == 100
    text, capped = kept_text(stream.chunks, True, stream.choice_events, 150)
    assert capped and text == ("abcd" * 100)[:150]


# --- data events that only look like JSON objects ---------------------------------------------

NOT_JSON = [
    b'data: tokens "choices":[{"index":0,"text":"a"}]}\n\n',  # no object start
    b'data: {"choices":[{"index":0,"text":"a"}]\n\n',  # no object end
    b'data: [{"choices":[{"index":0,"text":"a"}]}]\n\n',  # an array
]


@pytest.mark.parametrize("bad", NOT_JSON)
@pytest.mark.parametrize("size", [None, 7, 4096])
def test_data_events_that_are_not_json_objects_fail_even_with_choices(bad: bytes, size):
    body = bad * 20 + DONE
    stream = SSEStream()
    feed(stream, body, size or len(body))
    stream.finish(len(body))
    assert stream.failure is not None and "is not a JSON object" in stream.failure
    assert len(stream.event_ns) == 0


@pytest.mark.parametrize("bad", NOT_JSON[:3])
def test_one_bad_event_among_good_ones_and_usage_fails(bad: bytes):
    usage = b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":3}}\n\n'
    body = event("a") + bad + event("b") + usage + DONE
    stream = SSEStream()
    stream.feed(body, 1)
    stream.finish(2)
    assert stream.failure == f"the stream's data event 2 is not a JSON object: {bad[6:-2]!r}"


def test_chat_events_not_json_fail():
    body = b"".join(b"data: x" + chat_event("a")[6:] + b"\n\n" for _ in range(5)) + DONE
    stream = SSEStream(chat=True)
    stream.feed(body, 1)
    stream.finish(2)
    assert stream.failure is not None and "is not a JSON object" in stream.failure


@pytest.mark.parametrize(
    "body",
    [
        event("data: {x") * 3 + DONE,  # "data: {" inside text: counts disagree, all parsed
        b'data: {"choices":[{"index":0,"text":"a"}]} \n\n' * 3 + DONE,  # a space after "}"
        b'data:{"choices":[{"index":0,"text":"a"}]}\r\n\r\n' * 3 + b"data:[DONE]\r\n\r\n",
        event("a") * 3 + b'data: {"choices":[{"index":0,"text":"b"}]}',  # last without \n\n
    ],
)
def test_valid_streams_in_doubt_are_parsed_and_pass(body: bytes):
    for size in (len(body), 5):
        stream = SSEStream()
        feed(stream, body, size)
        stream.finish(len(body))
        assert stream.failure is None, stream.failure
        assert len(stream.event_ns) in (3, 4)


def test_a_probe_with_an_event_over_the_bound_fails_as_a_request_does():
    import asyncio
    from types import SimpleNamespace

    from loadgen.server.probes import _probe

    line = b'data: {"choices":[{"text":"' + b"x" * (MAX_EVENT_BYTES + 1)
    good = event("a") + DONE
    answers = []

    class Client:
        async def send(self, *args, **kwargs):
            return answers.pop()

    for body, expected in ((line, None), (good, 0.5)):
        chunks = [(10**9, body[i : i + 2**20]) for i in range(0, len(body), 2**20)]
        answers.append(
            SimpleNamespace(status=200, chunks=chunks, ended_ns=2 * 10**9, sent_ns=5 * 10**8)
        )
        got = asyncio.run(
            _probe(Client(), "http://127.0.0.1:1/v1/completions", b"{}", "sse", False)
        )
        assert got == expected
