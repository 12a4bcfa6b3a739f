"""The prompt tokens a server served from its prefix cache, read from its answers as each
server sends them (the mock's personalities render their bytes): OpenAI's
``usage.prompt_tokens_details.cached_tokens``, llama.cpp's ``timings.cache_n``; without
sockets."""

from __future__ import annotations

import orjson
import pytest

from loadgen.mock.personalities.base import Personality, StreamRequest
from loadgen.mock.personalities.llamacpp import LlamaCpp
from loadgen.mock.personalities.sglang import SGLang
from workers.sse import SSEStream


def answer(chat: bool, cached: int) -> StreamRequest:
    return StreamRequest(
        chat=chat, request_id="r1", created=1, model="m", model_json=b'"m"',
        finish_reason="length", prompt_tokens=64, completion_tokens=3, include_usage=True,
        ttft_ms=1.0, itl_ms=1.0, cached_tokens=cached,
    )  # fmt: skip


def streamed(personality: Personality, r: StreamRequest) -> bytes:
    """The stream's bytes as the mock writes them: head, token events, tail."""
    shape = personality.stream_shape(r)
    end = personality.chat_end if r.chat else personality.completion_end
    texts = [b" a", b" b", b" c"]
    events = [shape.prefix + text + end + shape.suffix for text in texts[:-1]]
    events.append((shape.last_prefix or shape.prefix) + texts[-1] + shape.last_suffix)
    return shape.head + b"".join(events) + shape.tail


def parsed(raw: bytes, chat: bool) -> SSEStream:
    stream = SSEStream(chat)
    stream.feed(raw, 0)
    stream.finish(1)
    return stream


@pytest.mark.parametrize("chat", [False, True])
@pytest.mark.parametrize("personality", [LlamaCpp(), SGLang()], ids=["llamacpp", "sglang"])
def test_the_cached_tokens_of_an_answer_are_read(personality: Personality, chat: bool) -> None:
    stream = parsed(streamed(personality, answer(chat, 48)), chat)
    assert stream.cached_tokens == 48
    plain = parsed(streamed(personality, answer(chat, -1)), chat)  # the same, without the figure
    assert len(stream.event_ns) == len(plain.event_ns)
    assert stream.prompt_tokens == plain.prompt_tokens


def test_an_answer_without_the_figure_leaves_none() -> None:
    vllm = parsed(streamed(Personality(), answer(False, -1)).replace(b"0" * 12, b"1"), False)
    assert vllm.prompt_tokens == 64 and vllm.cached_tokens == -1
    sglang = parsed(streamed(SGLang(), answer(True, -1)), True)
    assert sglang.prompt_tokens == 64 and sglang.cached_tokens == -1


def test_llamacpps_timings_count_where_usage_has_no_details() -> None:
    final = {"choices": [], "usage": {"prompt_tokens": 64, "completion_tokens": 1},
             "timings": {"cache_n": 32, "prompt_n": 32}}  # fmt: skip
    token = {"choices": [{"index": 0, "delta": {"content": " a"}}]}
    raw = b"".join(b"data: " + orjson.dumps(e) + b"\n\n" for e in (token, final))
    stream = parsed(raw + b"data: [DONE]\n\n", True)
    assert (stream.prompt_tokens, stream.cached_tokens) == (64, 32)


def test_a_whole_answer_reports_them_too() -> None:
    body = orjson.dumps(LlamaCpp().response(answer(False, 16), " a b c"))
    stream = parsed(body, False)
    assert stream.cached_tokens == 16
