"""The parser's shortcuts for the servers' stream shapes give what parsing every event gives:
spaced JSON counted by its own byte pattern, a chat stream's role and finish chunks found at
the part's edges, and the text read by splitting at its keys (workers/sse.py)."""

from __future__ import annotations

import json

import orjson
import pytest

from workers.sse import SSEStream, is_token_event
from workers.stream_text import _regular_text, _text_event_by_event, generated_text

ROLE = {"role": "assistant", "content": ""}
FINISH: dict = {}


def completion(text: object, **extra: object) -> dict:
    return {"id": "c", "choices": [{"index": 0, "text": text, "finish_reason": None}], **extra}


def chat(delta: dict) -> dict:
    return {"id": "c", "choices": [{"index": 0, "delta": delta, "finish_reason": None}]}


def body(events: list[dict], spaced: bool = False) -> bytes:
    separators = (", ", ": ") if spaced else (",", ":")
    # Raw UTF-8, as vLLM and llama.cpp write it (json.dumps would escape non-ASCII).
    dumps = [json.dumps(e, separators=separators, ensure_ascii=False) for e in events]
    lines = [f"data: {d}\n\n" for d in dumps]
    return ("".join(lines) + "data: [DONE]\n\n").encode()


def tokens_by_parsing(raw: bytes, chat_: bool) -> int:
    """Token events as upstream decides them: every event parsed."""
    blocks = [b[6:] for b in raw.split(b"\n\n") if b.startswith(b"data: {")]
    return sum(is_token_event(b, chat_) for b in blocks)


def parsed(raw: bytes, chat_: bool, reads: int = 1) -> SSEStream:
    stream = SSEStream(chat_)
    size = -(-len(raw) // reads)
    for i in range(0, len(raw), size):
        stream.feed(raw[i : i + size], i)
    stream.finish(len(raw))
    return stream


LONG = 200  # token events: parts well over twice the edge the role and finish are sought in
# Texts that differ (lengths, empty, non-ASCII, braces, "text" itself), none escaped in JSON.
VARIED = [" a", "", " the", "é", " {x}", "text", " 東京", ",", " :"] * 10

COMPLETIONS = {
    "compact": body([completion(" a")] * LONG),
    "spaced": body([completion(" a")] * LONG, spaced=True),
    "usage on the last choices chunk": body(
        [completion(" a")] * (LONG - 1) + [completion(" b", usage={"completion_tokens": 9})]
    ),
    "escapes": body([completion('say "hi"\n'), completion(" é\u2028x")] * 30),
    "null text": body([completion(" a"), completion(None), completion(" b")] * 30),
    "text key in logprobs": body([completion(" a", logprobs={"text": "x"})] * 30),
    "varied texts": body([completion(t) for t in VARIED]),
    "a field that changes mid-stream": body(
        [completion(t, created=1) for t in VARIED[:40]]
        + [completion(t, created=2) for t in VARIED[40:]]
    ),
    "llama.cpp's key order": body(
        [{"choices": [{"text": t, "index": 0}], "created": 1, "object": "x"} for t in VARIED]
    ),
}

CHATS = {
    "vLLM": body([chat(ROLE)] + [chat({"content": " a"})] * LONG + [chat(FINISH)]),
    "a silent chunk mid-stream": body(
        [chat({"content": " a"})] * (LONG // 2) + [chat(ROLE)] + [chat({"content": " b"})] * LONG
    ),
    "an empty content is a token": body([chat(ROLE)] + [chat({"content": ""})] * 40),
    "a role after an empty content is none": body(
        [chat({"content": "", "role": "assistant"})] + [chat({"content": " a"})] * LONG
    ),
    "spaced": body([chat(ROLE)] + [chat({"content": " a"})] * 40 + [chat(FINISH)], spaced=True),
    "escapes": body([chat(ROLE)] + [chat({"content": 'a "q"\n'})] * 40 + [chat(FINISH)]),
    "null content": body([chat({"content": None, "tool_calls": [{"index": 0}]})] * 40),
    "varied contents": body([chat(ROLE)] + [chat({"content": t}) for t in VARIED] + [chat(FINISH)]),
}


@pytest.mark.parametrize("reads", [1, 3, 40])
@pytest.mark.parametrize("name", COMPLETIONS)
def test_completions_counts_and_text_equal_parsing_every_event(name, reads):
    raw = COMPLETIONS[name]
    stream = parsed(raw, False, reads)
    assert len(stream.event_ns) == tokens_by_parsing(raw, False)
    text = generated_text(stream.chunks, False, stream.choice_events)
    assert text == _text_event_by_event(raw, False)


@pytest.mark.parametrize("reads", [1, 3, 40])
@pytest.mark.parametrize("name", CHATS)
def test_chat_counts_and_text_equal_parsing_every_event(name, reads):
    raw = CHATS[name]
    stream = parsed(raw, True, reads)
    assert len(stream.event_ns) == tokens_by_parsing(raw, True)
    text = generated_text(stream.chunks, True, stream.choice_events)
    assert text == _text_event_by_event(raw, True)


def test_usage_on_the_last_choices_chunk_leaves_the_counts_to_the_text():
    stream = parsed(COMPLETIONS["usage on the last choices chunk"], False)
    assert (stream.prompt_tokens, stream.completion_tokens) == (-1, -1)
    assert generated_text(stream.chunks, False, stream.choice_events) == " a" * (LONG - 1) + " b"


def test_the_text_of_a_stream_with_escapes_is_decoded_as_json():
    raw = COMPLETIONS["escapes"]
    expected = "".join(orjson.loads(b[6:])["choices"][0]["text"] for b in raw.split(b"\n\n")[:2])
    assert generated_text([raw], False, 60).startswith(expected)


@pytest.mark.parametrize(
    ("name", "regular"),
    [("varied texts", True), ("llama.cpp's key order", True), ("compact", True),
     ("a field that changes mid-stream", False), ("usage on the last choices chunk", True)],
)  # fmt: skip
def test_the_text_between_identical_fillers_is_read_in_one_split_or_left_to_the_slices(
    name, regular
):
    """Token chunks that differ only in their text give it in one split (the last may carry
    more: it ends the texts); one filler that differs leaves the stream to a slice per event,
    which tests above check."""
    raw = COMPLETIONS[name]
    key = b'"text":"'
    text = _regular_text(raw, key, raw.count(key))
    assert (text == _text_event_by_event(raw, False)) if regular else text is None
