"""Property tests of ``SSEStream.feed`` (issue 27, point 10): a valid stream, however its bytes
are split into reads, gives what it gives in one read (token events, usage, [DONE], failure,
its text); any bytes, however split, raise nothing but the documented ``EventTooLarge``, and
only past the stream's ``max_event_bytes``. Bounded examples, no example database."""

from __future__ import annotations

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from workers.sse import EventTooLarge, SSEStream
from workers.stream_text import generated_text

BOUNDED = settings(
    max_examples=150,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

texts = st.text(max_size=12)
nonempty = st.text(min_size=1, max_size=12)


@st.composite
def valid_stream(draw) -> tuple[bytes, bool, int, str]:
    """A stream a server could send: (body, chat, token events, their text)."""
    chat = draw(st.booleans())
    spaced = draw(st.booleans())  # Python's json.dumps separators, or compact
    crlf = draw(st.booleans())
    pieces = draw(st.lists(nonempty if chat else texts, max_size=12))

    def dumps(obj: object) -> bytes:
        if spaced:
            import json

            return json.dumps(obj).encode()
        return orjson.dumps(obj)

    events = []
    if chat and draw(st.booleans()):
        events.append({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]})
    for piece in pieces:
        if chat:
            events.append({"choices": [{"index": 0, "delta": {"content": piece}}]})
        else:
            events.append({"choices": [{"index": 0, "text": piece}]})
        if draw(st.integers(0, 5)) == 0:
            events.append(": ping")
    usage = draw(st.booleans())
    if usage:
        counts = {"prompt_tokens": 3, "completion_tokens": len(pieces)}
        events.append({"choices": [], "usage": counts, "metrics": {"queue_time_ms": 1.5}})
    blocks = [
        e.encode() if isinstance(e, str) else (b"data: " if spaced else b"data:") + dumps(e)
        for e in events
    ]
    if draw(st.booleans()):
        blocks.append(b"data: [DONE]")
    sep = b"\r\n" if crlf else b"\n"
    body = b"".join(block + sep + sep for block in blocks)
    return body, chat, len(pieces), "".join(pieces)


def split(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True) if b > a]


def parse(reads: list[bytes], chat: bool, limit: int | None = None) -> SSEStream:
    stream = SSEStream(chat) if limit is None else SSEStream(chat, max_event_bytes=limit)
    for i, data in enumerate(reads):
        stream.feed(data, i)
    stream.finish(len(reads))
    return stream


def summary(stream: SSEStream) -> tuple:
    return (
        len(stream.event_ns),
        stream.choice_events,
        stream.prompt_tokens,
        stream.completion_tokens,
        stream.done,
        stream.failure,
        stream.truncated,
    )


@BOUNDED
@given(valid_stream(), st.lists(st.integers(0, 10**6), max_size=24))
def test_a_valid_stream_gives_the_same_however_it_is_split(stream, cuts):
    body, chat, tokens, text = stream
    whole = parse([body], chat)
    assert whole.failure is None, whole.failure
    assert len(whole.event_ns) == tokens
    assert generated_text(whole.chunks, chat, whole.choice_events) == text
    pieces = parse(split(body, cuts), chat)
    assert summary(pieces) == summary(whole)
    assert generated_text(pieces.chunks, chat, pieces.choice_events) == text
    assert list(pieces.event_ns) == sorted(pieces.event_ns)  # stamped in arrival order


@BOUNDED
@given(valid_stream(), st.integers(1, 64))
def test_a_valid_stream_byte_by_byte(stream, size):
    body, chat, tokens, _ = stream
    reads = [body[i : i + size] for i in range(0, len(body), size)]
    whole = summary(parse([body], chat))
    assert summary(parse(reads, chat)) == whole and whole[0] == tokens


# Fragments of SSE and JSON that junk is built from, to reach the parser's branches.
FRAGMENTS = [
    b"data:", b"data: ", b"\n", b"\n\n", b"\r\n", b"\r", b":", b"{", b"}", b"[", b"]", b'"',
    b"[DONE]", b'"choices":[{', b'"choices": [{', b'"choices":[]', b'"text":"', b'"delta":{',
    b'"content":"', b'"role":"assistant"', b'"usage":{"completion_tokens":3}', b'"usage":null',
    b'"metrics":{"queue_time_ms":1}', b'"error":"x"', b"error: ", b"event: x", b"\\", b",",
    b"null", b"\xef\xbb\xbf", b"\xff", b" ",
]  # fmt: skip
junk = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from(FRAGMENTS) | st.binary(max_size=4), max_size=60).map(b"".join),
)


@BOUNDED
@given(junk, st.lists(st.integers(0, 10**6), max_size=16), st.booleans())
def test_any_bytes_however_split_raise_nothing(body, cuts, chat):
    for reads in ([body], split(body, cuts)):
        stream = parse(reads, chat)
        assert stream.failure is None or isinstance(stream.failure, str)
        assert len(stream.event_ns) <= max(stream.choice_events, 1)
        assert isinstance(generated_text(stream.chunks, chat, stream.choice_events), str)


@BOUNDED
@given(junk, st.lists(st.integers(0, 10**6), max_size=16), st.integers(1, 40))
def test_past_a_small_bound_only_event_too_large(body, cuts, limit):
    for reads in ([body], split(body, cuts)):
        try:
            parse(reads, False, limit)
        except EventTooLarge as exc:
            assert f"longer than {limit} bytes (MAX_EVENT_BYTES)" in str(exc)
            assert len(body) > limit
