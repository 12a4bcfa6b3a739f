"""Token events per backend as vLLM 0.33 counts them, the server's metrics object and
non-streamed answers, with each server's real chunk sequences (docs/servers.md)."""

from __future__ import annotations

import itertools
import math

import orjson
import pytest

from workers.sse import SSEStream, has_streamed_output, is_token_event
from workers.stream_text import generated_text

# --- real chunk sequences, as the servers write them -------------------------------------

VLLM_CHAT = [
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,'
    b'"finish_reason":null}],"prompt_token_ids":null}',
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":"Hello"},"logprobs":null,"finish_reason":null,'
    b'"token_ids":null}]}',
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[{"index":0,"delta":{"content":" world"},"logprobs":null,'
    b'"finish_reason":"length","stop_reason":null,"token_ids":null}]}',
    b'{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m",'
    b'"choices":[],"usage":{"prompt_tokens":9,"total_tokens":11,"completion_tokens":2},'
    b'"metrics":{"queue_time_ms":1.5,"time_to_first_token_ms":42.25}}',
]
LLAMA_CPP_CHAT = [
    b'{"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant","content":null}}],'
    b'"created":1,"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"chat.completion.chunk"}',
    b'{"choices":[{"finish_reason":null,"index":0,"delta":{"content":"Hello"}}],"created":1,'
    b'"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"chat.completion.chunk"}',
    b'{"choices":[{"finish_reason":null,"index":0,"delta":{"content":" there"}}],"created":1,'
    b'"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"chat.completion.chunk"}',
    b'{"choices":[{"finish_reason":"length","index":0,"delta":{}}],"created":1,'
    b'"id":"chatcmpl-x","model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"chat.completion.chunk"}',
    b'{"choices":[],"created":1,"id":"chatcmpl-x","model":"smollm2",'
    b'"system_fingerprint":"b0-unknown","object":"chat.completion.chunk",'
    b'"usage":{"completion_tokens":2,"prompt_tokens":12,"total_tokens":14},'
    b'"timings":{"prompt_n":12,"predicted_n":2}}',
]
LLAMA_CPP_COMPLETIONS = [
    b'{"choices":[{"text":" Paris","index":0,"logprobs":null,"finish_reason":null}],'
    b'"created":1,"model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"text_completion","id":"cmpl-x"}',
    b'{"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"length"}],'
    b'"created":1,"model":"smollm2","system_fingerprint":"b0-unknown",'
    b'"object":"text_completion","id":"cmpl-x",'
    b'"usage":{"completion_tokens":2,"prompt_tokens":5,"total_tokens":7,'
    b'"prompt_tokens_details":{"cached_tokens":0}},"timings":{"prompt_n":5}}',
]
# SGLang writes every delta key, nulls included, role before content.
SGLANG_CHAT = [
    b'{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"role":"assistant","content":"","reasoning_content":null,"tool_calls":null},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
    b'{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"role":null,"content":"Hi","reasoning_content":null,"tool_calls":null},'
    b'"logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}',
    b'{"id":"1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,'
    b'"delta":{"role":null,"content":null,"reasoning_content":null,"tool_calls":null},'
    b'"logprobs":null,"finish_reason":"length","matched_stop":null}],"usage":null}',
]


def sse(payloads: list[bytes], space: bool = True) -> bytes:
    prefix = b"data: " if space else b"data:"
    return b"".join(prefix + p + b"\n\n" for p in payloads) + prefix + b"[DONE]\n\n"


def reads(raw: bytes, cuts: list[int]) -> list[bytes]:
    bounds = [0, *cuts, len(raw)]
    return [raw[a:b] for a, b in itertools.pairwise(bounds)]


def feed_all(chunks: list[bytes], chat: bool) -> SSEStream:
    stream = SSEStream(chat)
    for t, chunk in enumerate(chunks, start=1):
        stream.feed(chunk, t)
    stream.finish(len(chunks) + 1)
    return stream


def upstream_count(payloads: list[bytes], chat: bool) -> int:
    """The token events upstream's loop counts, from the parsed chunks."""
    count = 0
    for payload in payloads:
        choices = orjson.loads(payload).get("choices")
        if choices and (not chat or has_streamed_output(choices[0])):
            count += 1
    return count


# --- the rule, chunk by chunk --------------------------------------------------------------


@pytest.mark.parametrize(
    ("delta", "expected"),
    [
        ({"role": "assistant", "content": ""}, False),  # vLLM's opening chunk
        ({"role": "assistant", "content": None}, False),  # llama.cpp's
        ({"role": "assistant"}, False),
        ({}, False),  # an empty finish chunk
        ({"content": None}, False),
        ({"content": ""}, True),  # a token that decodes to nothing
        ({"content": "x"}, True),
        ({"role": "assistant", "content": "x"}, True),
        ({"reasoning": "think"}, True),
        ({"reasoning_content": "think"}, False),  # upstream reads only "reasoning"
        ({"tool_calls": [{"index": 0, "function": {"arguments": "{"}}]}, True),
        ({"tool_calls": []}, False),
        ({"function_call": {"name": "f"}}, True),
    ],
)
def test_chat_rule_matches_upstreams_choice_has_streamed_output(delta, expected):
    payload = orjson.dumps({"choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    assert has_streamed_output({"delta": delta}) is expected
    assert is_token_event(payload, chat=True) is expected
    stream = feed_all([sse([payload])], chat=True)
    assert len(stream.event_ns) == int(expected)


def test_completions_count_every_nonempty_choices_chunk():
    payload = orjson.dumps({"choices": [{"index": 0, "text": "", "finish_reason": "length"}]})
    assert is_token_event(payload, chat=False)
    assert not is_token_event(b'{"choices":[],"usage":{}}', chat=False)


@pytest.mark.parametrize(
    ("payloads", "chat"),
    [
        (VLLM_CHAT, True),
        (LLAMA_CPP_CHAT, True),
        (SGLANG_CHAT, True),
        (LLAMA_CPP_COMPLETIONS, False),
    ],
    ids=["vllm-chat", "llamacpp-chat", "sglang-chat", "llamacpp-completions"],
)
@pytest.mark.parametrize("space", [True, False])
def test_real_sequences_count_as_upstream_in_any_split(payloads, chat, space):
    raw = sse(payloads, space)
    expected = upstream_count(payloads, chat)
    for cuts in ([], [len(raw) // 2], list(range(7, len(raw), 41)), list(range(1, len(raw)))):
        stream = feed_all(reads(raw, cuts), chat)
        assert len(stream.event_ns) == expected, cuts
        assert stream.done


def test_role_chunk_in_the_same_read_as_the_first_content_chunk():
    raw = sse(LLAMA_CPP_CHAT)
    cut = raw.index(b"\n\n", raw.index(b"Hello")) + 2  # role + first content in read 1
    stream = feed_all([raw[:cut], raw[cut:]], chat=True)
    assert list(stream.event_ns) == [1, 2]  # the role chunk is no token; the first is at read 1
    assert (stream.prompt_tokens, stream.completion_tokens) == (12, 2)


def test_finish_usage_and_done_in_one_read_do_not_extend_the_request():
    raw = sse(LLAMA_CPP_CHAT)
    cut = raw.index(b"\n\n", raw.index(b" there")) + 2
    stream = feed_all([raw[:cut], raw[cut:]], chat=True)
    assert list(stream.event_ns) == [1, 1]
    assert stream.done


def test_usage_on_a_chat_chunk_without_output_is_read_as_upstreams_elif():
    payload = orjson.dumps(
        {
            "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7},
        }
    )
    stream = feed_all([sse([payload])], chat=True)
    assert len(stream.event_ns) == 0
    assert (stream.prompt_tokens, stream.completion_tokens) == (3, 4)


def test_usage_on_llamacpps_last_completions_chunk_is_not_read_as_upstreams_elif():
    stream = feed_all([sse(LLAMA_CPP_COMPLETIONS)], chat=False)
    assert len(stream.event_ns) == 2
    assert (stream.prompt_tokens, stream.completion_tokens) == (-1, -1)  # text re-tokenised


def test_chat_text_skips_role_and_finish_chunks():
    assert generated_text([sse(LLAMA_CPP_CHAT)], chat=True) == "Hello there"
    assert generated_text([sse(SGLANG_CHAT)], chat=True) == "Hi"


# --- the server's metrics object -----------------------------------------------------------


def test_vllm_metrics_object_becomes_server_queue_time_and_ttft():
    stream = feed_all(reads(sse(VLLM_CHAT), [50, 400]), chat=True)
    assert stream.server_queue_s == pytest.approx(0.0015)
    assert stream.server_ttft_s == pytest.approx(0.04225)
    assert len(stream.event_ns) == 2
    assert (stream.prompt_tokens, stream.completion_tokens) == (9, 2)


def test_metrics_on_the_last_token_event_without_usage_are_read_however_the_reads_fall():
    token = b'{"choices":[{"index":0,"text":"a"}]}'
    metrics = b'"metrics":{"queue_time_ms":3,"time_to_first_token_ms":7}'
    last = b'{"choices":[{"index":0,"text":"b"}],' + metrics + b"}"
    raw = sse([token, token, last])
    for cut in range(1, len(raw)):
        stream = feed_all(reads(raw, [cut]), chat=False)
        assert stream.server_queue_s == pytest.approx(0.003), cut
        assert stream.server_ttft_s == pytest.approx(0.007), cut
        assert len(stream.event_ns) == 3


def test_no_metrics_object_leaves_nan_and_a_partial_one_nan_for_the_missing_key():
    stream = feed_all([sse(LLAMA_CPP_CHAT)], chat=True)
    assert math.isnan(stream.server_queue_s) and math.isnan(stream.server_ttft_s)
    partial = b'{"choices":[],"metrics":{"queue_time_ms":2,"time_to_first_token_ms":true}}'
    stream = feed_all([sse([partial])], chat=False)
    assert stream.server_queue_s == pytest.approx(0.002)
    assert math.isnan(stream.server_ttft_s)  # a bool is no number, as upstream's check


# --- non-streamed answers ------------------------------------------------------------------


def test_a_non_streamed_chat_answer_is_one_token_event_with_its_usage():
    body = orjson.dumps(
        {
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hi there"}}],
            "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
        }
    )
    stream = feed_all(reads(body, [10, 30]), chat=True)
    assert list(stream.event_ns) == [4]  # stamped when the body ends
    assert (stream.prompt_tokens, stream.completion_tokens) == (5, 2)
    assert generated_text(reads(body, [10]), chat=True) == "Hi there"


def test_a_non_streamed_completions_answer_and_an_empty_chat_message():
    body = (
        b'{"choices":[{"index":0,"text":"abc"}],"usage":{"prompt_tokens":1,"completion_tokens":3}}'
    )
    stream = feed_all([body], chat=False)
    assert len(stream.event_ns) == 1 and stream.completion_tokens == 3
    assert generated_text([body], chat=False) == "abc"
    empty = b'{"choices":[{"index":0,"message":{"role":"assistant","content":null}}]}'
    assert len(feed_all([empty], chat=True).event_ns) == 0
