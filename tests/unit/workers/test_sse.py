"""Tests for the incremental SSE parser (reference §2.2-2.3): event boundaries, read stamps,
speculative release, usage/error side channels and generated text."""

from __future__ import annotations

import itertools

import orjson
import pytest

from workers.sse import SSEStream, choices_nonempty, data_of
from workers.stream_text import generated_text

MODEL = "meta-llama/Llama-3.1-8B-Instruct"


# --- realistic vLLM chunks ----------------------------------------------------------------


def cmpl_chunk(text: str, finish: str | None = None) -> bytes:
    """A /v1/completions stream chunk as vLLM sends it (usage is null on token chunks)."""
    return orjson.dumps(
        {
            "id": "cmpl-5f0c2b1e9a7d4c36",
            "object": "text_completion",
            "created": 1718000000,
            "model": MODEL,
            "choices": [
                {
                    "index": 0,
                    "text": text,
                    "logprobs": None,
                    "finish_reason": finish,
                    "stop_reason": None,
                }
            ],
            "usage": None,
        }
    )


def chat_chunk(delta: dict, finish: str | None = None) -> bytes:
    """A /v1/chat/completions stream chunk as vLLM sends it."""
    return orjson.dumps(
        {
            "id": "chatcmpl-0d6a1c2f8e",
            "object": "chat.completion.chunk",
            "created": 1718000000,
            "model": MODEL,
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }
    )


def usage_chunk(prompt: int, completion: int, obj: str = "text_completion") -> bytes:
    """The trailing stream_options.include_usage chunk: empty choices plus usage."""
    return orjson.dumps(
        {
            "id": "cmpl-5f0c2b1e9a7d4c36",
            "object": obj,
            "created": 1718000000,
            "model": MODEL,
            "choices": [],
            "usage": {
                "prompt_tokens": prompt,
                "total_tokens": prompt + completion,
                "completion_tokens": completion,
            },
        }
    )


def sse(payload: bytes, sep: bytes = b"\n\n") -> bytes:
    return b"data: " + payload + sep


DONE = b"data: [DONE]\n\n"


# --- choices_nonempty / data_of -----------------------------------------------------------


@pytest.mark.parametrize(
    ("payload", "expected"),
    [
        (cmpl_chunk(" Hello"), True),
        (cmpl_chunk(""), True),  # empty text still counts: the choices list is not empty
        (chat_chunk({"role": "assistant", "content": ""}), True),
        (usage_chunk(12, 5), False),
        (b'{"id":"x","choices":[],"usage":null}', False),
        (b'{"id":"x","choices": [ ],"usage":null}', False),
        (b'{"id":"x","choices" :\t[\r\n ],"usage":null}', False),
        (b'{"id":"x","choices": [\n{"index":0,"text":"a"}]}', True),
        (b'{"id":"x","choices":null}', False),
        (b'{"id":"x","object":"text_completion"}', False),
        (b'{"error":{"message":"boom"}}', False),
        # the word inside generated text is escaped, so it cannot be mistaken for the key
        (b'{"id":"x","choices":[{"index":0,"text":"\\"choices\\": []"}]}', True),
        (b"[DONE]", False),
        (b'{"choices":', False),  # truncated
        (b'{"choices": [', False),  # truncated right after the bracket
    ],
)
def test_choices_nonempty(payload, expected):
    assert choices_nonempty(payload) is expected


def test_data_of_single_line_with_and_without_space():
    assert data_of(b"data: {}") == b"{}"
    assert data_of(b"data:{}") == b"{}"
    assert data_of(b"data: [DONE]") == b"[DONE]"


def test_data_of_multi_field_event():
    assert data_of(b'event: message\nid: 7\ndata: {"a":1}') == b'{"a":1}'
    assert data_of(b"data: line1\ndata: line2") == b"line1\nline2"


def test_data_of_without_data_field():
    assert data_of(b": ping") is None
    assert data_of(b"event: keepalive") is None
    assert data_of(b"") is None


# --- boundaries and stamps ----------------------------------------------------------------


def test_single_event_in_one_read():
    s = SSEStream()
    s.feed(sse(cmpl_chunk(" Hi")), 100)
    assert list(s.event_ns) == [100]
    assert not s.done
    assert s.error is None
    assert (s.prompt_tokens, s.completion_tokens) == (-1, -1)


def test_event_split_across_reads_is_stamped_by_the_completing_read():
    raw = sse(cmpl_chunk(" Hello"))
    s = SSEStream()
    s.feed(raw[:7], 10)  # "data: {" : incomplete JSON, nothing released
    assert list(s.event_ns) == []
    s.feed(raw[7:60], 20)  # still incomplete
    assert list(s.event_ns) == []
    s.feed(raw[60:], 30)  # completes the payload and the separator
    assert list(s.event_ns) == [30]


def test_split_inside_data_prefix():
    raw = sse(cmpl_chunk(" a"))
    s = SSEStream()
    s.feed(raw[:3], 1)  # "dat"
    s.feed(raw[3:], 2)
    assert list(s.event_ns) == [2]


def test_many_events_in_one_read_share_its_stamp():
    raw = b"".join(sse(cmpl_chunk(t)) for t in [" The", " quick", " brown", " fox"])
    s = SSEStream()
    s.feed(raw, 555)
    assert list(s.event_ns) == [555, 555, 555, 555]


def test_events_over_several_reads_keep_their_own_stamps():
    a, b, c = sse(cmpl_chunk("a")), sse(cmpl_chunk("b")), sse(cmpl_chunk("c"))
    s = SSEStream()
    s.feed(a + b[:20], 1)
    s.feed(b[20:] + c, 2)
    assert list(s.event_ns) == [1, 2, 2]


def test_comments_are_skipped():
    s = SSEStream()
    s.feed(b": ping\n\n" + sse(cmpl_chunk("a")) + b": ping - 2024-06-10 12:00:00\n\n", 1)
    s.feed(b":\n\n", 2)
    s.feed(sse(cmpl_chunk("b")), 3)
    assert list(s.event_ns) == [1, 3]
    assert s.error is None
    assert not s.done


def test_done_sets_done_and_is_not_an_event():
    s = SSEStream()
    s.feed(sse(cmpl_chunk("a", finish="length")) + DONE, 5)
    assert list(s.event_ns) == [5]
    assert s.done


def test_done_without_separator_is_released_at_once():
    s = SSEStream()
    s.feed(sse(cmpl_chunk("a")) + b"data: [DONE]", 5)
    assert s.done
    s.feed(b"\n\n", 6)
    s.finish(7)
    assert list(s.event_ns) == [5]


def test_usage_only_chunk_sets_tokens_and_is_not_a_token_event():
    s = SSEStream()
    s.feed(sse(cmpl_chunk(" a")) + sse(cmpl_chunk(" b", finish="length")), 1)
    s.feed(sse(usage_chunk(prompt=12, completion=2)) + DONE, 2)
    assert list(s.event_ns) == [1, 1]  # the usage chunk at read 2 does not extend latency
    assert (s.prompt_tokens, s.completion_tokens) == (12, 2)
    assert s.done


@pytest.mark.parametrize(
    "choices",
    [b'"choices":[]', b'"choices": []', b'"choices": [ ]', b'"choices" :\t[ \t]'],
)
def test_usage_only_chunk_whitespace_variants(choices):
    payload = (
        b'{"id":"cmpl-1","object":"text_completion","created":1718000000,"model":"m",'
        + choices
        + b',"usage":{"prompt_tokens":7,"total_tokens":10,"completion_tokens":3}}'
    )
    s = SSEStream()
    s.feed(sse(payload), 9)
    assert list(s.event_ns) == []
    assert (s.prompt_tokens, s.completion_tokens) == (7, 3)


def test_usage_riding_on_a_choices_chunk_is_never_read_as_upstreams_elif():
    # llama.cpp's and TGI's completions, continuous_usage_stats, Dynamo: upstream's elif never
    # reads this usage, keeps the dataset's prompt length and re-tokenises the text; so does
    # loadgen (the worker sends the text back, as the count is -1)
    chunk = orjson.loads(cmpl_chunk(" a"))
    chunk["usage"] = {"prompt_tokens": 12, "total_tokens": 13, "completion_tokens": 1}
    s = SSEStream()
    s.feed(sse(orjson.dumps(chunk)), 4)
    s.finish(5)
    assert list(s.event_ns) == [4]
    assert (s.prompt_tokens, s.completion_tokens) == (-1, -1)
    assert generated_text(s.chunks, False, s.choice_events) == " a"
    s = SSEStream()
    s.feed(sse(orjson.dumps(chunk)) + sse(usage_chunk(12, 2)), 4)
    s.finish(5)
    assert (s.prompt_tokens, s.completion_tokens) == (12, 2)  # the usage-only chunk wins


def test_crlf_separators():
    raw = b"".join(sse(cmpl_chunk(t), sep=b"\r\n\r\n") for t in ["a", "b"])
    raw += sse(usage_chunk(3, 2), sep=b"\r\n\r\n") + b"data: [DONE]\r\n\r\n"
    s = SSEStream()
    s.feed(raw, 8)
    assert list(s.event_ns) == [8, 8]
    assert (s.prompt_tokens, s.completion_tokens) == (3, 2)
    assert s.done


def test_crlf_split_across_reads_not_speculated():
    # A multi-field event is never released speculatively, so it must wait for the separator,
    # whose "\r\n" pair is split between two reads.
    raw = b"event: message\r\ndata: " + cmpl_chunk("a") + b"\r\n\r\n"
    s = SSEStream()
    s.feed(raw[:-3], 1)  # ends with "\r\n\r"
    assert list(s.event_ns) == []
    s.feed(raw[-3:], 2)  # "\n\r\n"
    assert list(s.event_ns) == [2]
    s.finish(3)
    assert list(s.event_ns) == [2]


@pytest.mark.parametrize("cut", [1, 2, 3])  # split inside the "\r\n\r\n" separator
def test_crlf_split_across_reads_with_next_event(cut):
    first = sse(cmpl_chunk("a"), sep=b"\r\n\r\n")
    second = sse(cmpl_chunk("b"), sep=b"\r\n\r\n")
    raw = first + second
    at = len(first) - 4 + cut
    s = SSEStream()
    s.feed(raw[:at], 1)
    s.feed(raw[at:], 2)
    s.finish(3)
    assert list(s.event_ns) == [1, 2]  # the first payload was complete at read 1


def test_speculative_release_of_complete_payload_without_separator():
    s = SSEStream()
    s.feed(b"data: " + cmpl_chunk(" a"), 10)  # TCP segment ended right before "\n\n"
    assert list(s.event_ns) == [10]
    s.feed(b"\n\n", 20)
    assert list(s.event_ns) == [10]  # the separator does not make a second event
    s.feed(sse(cmpl_chunk(" b")), 30)
    s.finish(40)
    assert list(s.event_ns) == [10, 30]


def test_speculative_release_with_half_a_separator():
    s = SSEStream()
    s.feed(b"data: " + cmpl_chunk(" a") + b"\n", 10)
    assert list(s.event_ns) == [10]
    s.feed(b"\n" + sse(cmpl_chunk(" b")), 20)
    assert list(s.event_ns) == [10, 20]


def test_speculative_release_after_a_separator_split_between_reads():
    # Read 1 ends between the two "\n" of event a's separator; read 2 brings the rest of that
    # separator and event b, complete but without its own separator. Upstream strips every
    # raw read, so b is speculatively released at read 2 (reference §2.2 steps 1 and 4).
    s = SSEStream()
    s.feed(b"data: " + cmpl_chunk(" a") + b"\n", 10)
    s.feed(b"\ndata: " + cmpl_chunk(" b"), 20)
    s.feed(b"\n\n", 30)
    s.finish(40)
    assert list(s.event_ns) == [10, 20]


def test_incomplete_payload_is_not_speculated():
    raw = b"data: " + cmpl_chunk(" a")
    s = SSEStream()
    s.feed(raw[:-1], 10)  # missing the closing brace
    assert list(s.event_ns) == []
    s.feed(raw[-1:], 20)
    assert list(s.event_ns) == [20]
    s.feed(b"\n\n", 30)
    assert list(s.event_ns) == [20]


def stream_bytes() -> tuple[bytes, list[int]]:
    """A short data-only stream and the index of the last byte of each token payload."""
    parts = [sse(b'{"id":"c","choices":[{"index":0,"text":"a"}]}')]
    parts.append(sse(b'{"id":"c","choices":[{"index":0,"text":"b"}]}'))
    parts.append(sse(b'{"id":"c","choices":[],"usage":{"prompt_tokens":4,"completion_tokens":2}}'))
    parts.append(DONE)
    raw = b"".join(parts)
    ends = [len(parts[0]) - 3, len(parts[0]) + len(parts[1]) - 3]
    return raw, ends


def test_every_two_read_split_stamps_each_event_by_its_closing_byte():
    raw, ends = stream_bytes()
    for k in range(len(raw) + 1):
        s = SSEStream()
        s.feed(raw[:k], 1)
        s.feed(raw[k:], 2)
        s.finish(3)
        expected = [1 if end < k else 2 for end in ends]
        assert list(s.event_ns) == expected, k
        assert (s.prompt_tokens, s.completion_tokens) == (4, 2), k
        assert s.done, k


def test_every_three_read_split_stamps_each_event_by_its_closing_byte():
    raw, ends = stream_bytes()
    bad = []
    for k1 in range(len(raw) + 1):
        for k2 in range(k1, len(raw) + 1):
            s = SSEStream()
            s.feed(raw[:k1], 1)
            s.feed(raw[k1:k2], 2)
            s.feed(raw[k2:], 3)
            s.finish(4)
            expected = [1 if end < k1 else 2 if end < k2 else 3 for end in ends]
            if list(s.event_ns) != expected or not s.done or s.completion_tokens != 2:
                bad.append((k1, k2, list(s.event_ns), expected))
    assert not bad, bad[:5]


def test_multi_field_event():
    s = SSEStream()
    s.feed(b"event: message\nid: 1\ndata: " + cmpl_chunk("a") + b"\n\n", 1)
    s.feed(b"id: 2\nevent: message\ndata: " + usage_chunk(5, 1) + b"\n\n", 2)
    assert list(s.event_ns) == [1]
    assert (s.prompt_tokens, s.completion_tokens) == (5, 1)


def test_in_stream_error_object():
    err = {
        "error": {
            "object": "error",
            "message": "boom",
            "type": "BadRequestError",
            "param": None,
            "code": 400,
        }
    }
    s = SSEStream()
    s.feed(sse(cmpl_chunk("a")) + sse(orjson.dumps(err)) + DONE, 3)
    s.finish(4)  # error events are found when the body is checked at its end
    assert s.error == "boom"
    assert list(s.event_ns) == [3]
    assert s.done


def test_in_stream_flat_error_response():
    # vLLM's ErrorResponse serialised on its own: {"object": "error", "message": ...}
    payload = b'{"object":"error","message":"context too long","type":"BadRequestError","code":400}'
    s = SSEStream()
    s.feed(sse(payload), 3)
    s.finish(4)
    assert s.error == "context too long"
    assert list(s.event_ns) == []


def test_error_as_string():
    s = SSEStream()
    s.feed(sse(b'{"error":"overloaded"}'), 3)
    s.finish(4)
    assert s.error == "overloaded"


def test_chat_role_only_first_chunk_counts_as_token_event():
    s = SSEStream()
    s.feed(sse(chat_chunk({"role": "assistant", "content": ""})), 100)
    s.feed(sse(chat_chunk({"content": "Hi"})), 200)
    s.feed(sse(chat_chunk({}, finish="stop")), 300)
    s.feed(sse(usage_chunk(9, 2, obj="chat.completion.chunk")) + DONE, 400)
    assert list(s.event_ns) == [100, 200, 300]
    assert (s.prompt_tokens, s.completion_tokens) == (9, 2)
    assert s.done


def test_finish_releases_last_event_without_separator():
    s = SSEStream()
    s.feed(sse(cmpl_chunk("a")), 1)
    s.feed(b"event: message\ndata: " + cmpl_chunk("b"), 2)  # not speculated: multi-field
    assert list(s.event_ns) == [1]
    s.finish(3)
    assert list(s.event_ns) == [1, 3]
    s.finish(4)  # the buffer is empty now
    assert list(s.event_ns) == [1, 3]


def test_finish_with_only_whitespace_or_comment_left():
    s = SSEStream()
    s.feed(sse(cmpl_chunk("a")) + b"\n", 1)
    s.finish(2)
    s2 = SSEStream()
    s2.feed(b": ping", 1)
    s2.finish(2)
    assert list(s.event_ns) == [1]
    assert list(s2.event_ns) == []


# --- generated_text -----------------------------------------------------------------------


def split_reads(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def test_generated_text_completions():
    raw = b"".join(sse(cmpl_chunk(t)) for t in ["The", " quick", "", " fox"])
    raw += sse(usage_chunk(5, 4)) + DONE
    for cuts in ([], [3, 100, 250], list(range(1, len(raw), 37))):
        assert generated_text(split_reads(raw, cuts), chat=False) == "The quick fox"


def test_generated_text_chat():
    raw = sse(chat_chunk({"role": "assistant", "content": ""}))
    raw += sse(chat_chunk({"content": "Hello"}))
    raw += sse(chat_chunk({"content": ", wörld"}))
    raw += sse(chat_chunk({"content": None}))  # e.g. a tool-call delta
    raw += sse(chat_chunk({}, finish="stop"))
    raw += sse(usage_chunk(9, 3, obj="chat.completion.chunk")) + DONE
    raw = raw.replace(b"\n\n", b"\r\n\r\n")
    for cuts in ([], [1, 2, 200], list(range(5, len(raw), 23))):
        assert generated_text(split_reads(raw, cuts), chat=True) == "Hello, wörld"


def test_generated_text_uses_the_right_field():
    raw = sse(cmpl_chunk("completion text")) + sse(chat_chunk({"content": "chat text"}))
    assert generated_text([raw], chat=False) == "completion text"
    assert generated_text([raw], chat=True) == "chat text"


def test_generated_text_last_event_without_separator():
    raw = sse(cmpl_chunk("a")) + b"data: " + cmpl_chunk("b")
    assert generated_text([raw], chat=False) == "ab"
