"""SGLang's ``launch_server`` personality (FastAPI on uvicorn; pydantic and msgspec chunks)."""

from __future__ import annotations

from typing import Any

import orjson

from loadgen.mock.load import LoadSnapshot
from loadgen.mock.personalities.base import (
    JSON_TYPE,
    Answer,
    Personality,
    StreamRequest,
    StreamShape,
    prometheus_lines,
    usage_dict,
)

# SGLang's answer to POST /flush_cache when nothing is running (its http_server.py).
FLUSHED = (
    b"Cache flushed.\nPlease check backend logs for more details. (When there are running or "
    b"waiting requests, the operation will not be performed.)\n"
)


class SGLang(Personality):
    """SGLang's ``launch_server`` (FastAPI on uvicorn; pydantic and msgspec chunks)."""

    name = "sglang"
    checks_model = False
    tokenizer = "sglang"
    prefix_cache_reset = "/flush_cache"
    completion_end = (
        b'","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
    )
    chat_end = b'"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'

    def answered_model(self, chat: bool, requested: Any, served: str) -> str:
        return requested if isinstance(requested, str) else "default"

    def _usage_chunk(self, start: bytes, r: StreamRequest) -> bytes:
        usage: dict[str, Any] = usage_dict(r)
        if r.cached_tokens >= 0:  # as SGLang with --enable-cache-report
            usage["prompt_tokens_details"] = {"cached_tokens": r.cached_tokens}
        elif r.chat:  # pydantic keeps the nulls; the completions chunk excludes them
            usage["prompt_tokens_details"] = None
        usage["reasoning_tokens"] = 0
        return start + b',"choices":[],"usage":' + orjson.dumps(usage) + b"}\n\n"

    def stream_shape(self, r: StreamRequest) -> StreamShape:
        start = self._start(r)
        tail = (self._usage_chunk(start, r) if r.include_usage else b"") + self.done()
        stop = b'"finish_reason":"%s","matched_stop":null}]' % r.finish_reason.encode()
        if not r.chat:
            prefix = start + b',"choices":[{"index":0,"text":"'
            last = b'","logprobs":null,' + stop + b',"usage":null}\n\n'
            return StreamShape(b"", prefix, b"", last, tail)
        head = start + (
            b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
            b'"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'
        )
        finish = start + b',"choices":[{"index":0,"delta":{},"logprobs":null,' + stop + b"}\n\n"
        prefix = start + b',"choices":[{"index":0,"delta":{"content":"'
        return StreamShape(head, prefix, b"", self.chat_end, finish + tail)

    def response(self, r: StreamRequest, text: str) -> dict[str, Any]:
        if r.chat:
            message = {"role": "assistant", "content": text, "reasoning_content": None}
            choice: dict[str, Any] = {"index": 0, "message": message | {"tool_calls": None}}
        else:
            choice = {"index": 0, "text": text}
        choice |= {"logprobs": None, "finish_reason": r.finish_reason, "matched_stop": None}
        details = None if r.cached_tokens < 0 else {"cached_tokens": r.cached_tokens}
        usage = usage_dict(r) | {"prompt_tokens_details": details, "reasoning_tokens": 0}
        return {
            "id": r.request_id,
            "object": "chat.completion" if r.chat else "text_completion",
            "created": r.created,
            "model": r.model,
            "choices": [choice],
            "usage": usage,
            "metadata": {"weight_version": "default"},
        }

    def error(self, status: int, message: str) -> Answer:
        kind = self.error_types.get(status, "Error")
        body = {"object": "error", "message": message, "type": kind, "param": None}
        return status, orjson.dumps(body | {"code": status}), JSON_TYPE

    def reset_answer(self) -> Answer:
        return 200, FLUSHED, "text/plain"

    def metric_lines(self, model: str, load: LoadSnapshot) -> list[str]:
        """SGLang's scheduler and tokenizer metrics (python/sglang/srt/metrics/collector.py):
        its KV cache as tokens used of the pool, retractions (its preemptions), and cached
        prompt tokens (the prefix cache's hits) where the mock keeps a cache."""
        samples: list[tuple[str, str, float]] = [
            ("num_running_reqs", "gauge", load.running),
            ("num_queue_reqs", "gauge", load.waiting),
            ("num_used_tokens", "gauge", load.kv_tokens),
            ("token_usage", "gauge", load.kv_usage),
            ("max_total_num_tokens", "gauge", load.kv_capacity),
            ("num_retracted_requests_total", "counter", load.preemptions),
            ("prompt_tokens_total", "counter", load.prompt_tokens),
            ("generation_tokens_total", "counter", load.generation_tokens),
        ]
        if load.cache_hits is not None:
            samples += [
                ("cache_hit_rate", "gauge", load.cache_hit_rate),
                ("cached_tokens_total", "counter", load.cache_hits),
            ]
        return prometheus_lines("sglang", f'{{model_name="{model}"}}', tuple(samples))
