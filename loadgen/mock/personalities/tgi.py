"""Hugging Face text-generation-inference's personality (axum on hyper, serde_json chunks)."""

from __future__ import annotations

from typing import Any

import orjson

from loadgen.mock.load import LoadSnapshot
from loadgen.mock.personalities.base import (
    JSON_TYPE,
    NO_IDLE_TIMEOUT_S,
    Answer,
    Personality,
    StreamRequest,
    StreamShape,
)

_TGI_FINGERPRINT = b',"system_fingerprint":"3.3.6-native"'


class TGI(Personality):
    """Hugging Face's text-generation-inference router (axum on hyper, serde_json chunks)."""

    name = "tgi"
    keepalive_timeout_s = NO_IDLE_TIMEOUT_S  # hyper sets no idle timeout
    checks_model = False
    tokenizer = "tgi"
    prefix_cache_reset = None  # TGI has no reset endpoint
    data = b"data:"  # axum's Event writes no space after the colon
    completion_end = b'","logprobs":null,"finish_reason":""}],"model":'
    chat_end = b'"},"logprobs":null,"finish_reason":null}],"usage":null}\n\n'

    def id_prefix(self, chat: bool) -> str:
        return ""  # TGI's ids are always empty; the mock's own id only names its records

    def answered_model(self, chat: bool, requested: Any, served: str) -> str:
        return requested if chat and isinstance(requested, str) else served

    def _finish(self, r: StreamRequest) -> str:
        if r.chat or r.finish_reason != "stop":
            return r.finish_reason
        return "eos_token"  # completions name an end of sequence so

    def _usage(self, r: StreamRequest) -> dict[str, int]:
        total = r.prompt_tokens + r.completion_tokens
        return {
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "total_tokens": total,
        }

    def _head(self, r: StreamRequest) -> bytes:
        """The chunk start in a last or chat chunk's key order, up to ``choices``."""
        kind = b"chat.completion.chunk" if r.chat else b"text_completion"
        return b"".join(
            (self.data, b'{"object":"', kind, b'","id":"","created":', str(r.created).encode(),
             b',"model":', r.model_json, _TGI_FINGERPRINT, b',"choices":[')
        )  # fmt: skip

    def stream_shape(self, r: StreamRequest) -> StreamShape:
        head = self._head(r)
        finish = orjson.dumps(self._finish(r))
        if not r.chat:
            # Token events put choices before the model; the last one, with usage, after it.
            prefix = b'data:{"object":"text_completion","id":"","created":%d,"choices":[' % (
                r.created
            )
            prefix += b'{"index":0,"text":"'
            suffix = r.model_json + _TGI_FINGERPRINT + b"}\n\n"
            last = b'","logprobs":null,"finish_reason":' + finish + b'}],"usage":'
            last += orjson.dumps(self._usage(r)) + b"}\n\n"
            last_prefix = head + b'{"index":0,"text":"'
            return StreamShape(b"", prefix, suffix, last, self.done(), last_prefix=last_prefix)
        prefix = head + b'{"index":0,"delta":{"role":"assistant","content":"'
        last = b'"},"logprobs":null,"finish_reason":' + finish + b'}],"usage":null}\n\n'
        tail = self.done()
        if r.include_usage:
            usage = head + b'],"usage":' + orjson.dumps(self._usage(r)) + b"}\n\n"
            tail = usage + tail
        return StreamShape(b"", prefix, b"", last, tail)

    def response(self, r: StreamRequest, text: str) -> dict[str, Any]:
        if r.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        return {
            "object": "chat.completion" if r.chat else "text_completion",
            "id": "",
            "created": r.created,
            "model": r.model,
            "system_fingerprint": "3.3.6-native",
            "choices": [choice | {"logprobs": None, "finish_reason": self._finish(r)}],
            "usage": self._usage(r),
        }

    def error(self, status: int, message: str) -> Answer:
        # Validation errors are 422; an unfinished generation is a 500.
        status, kind = {400: (422, "validation"), 500: (500, "incomplete_generation")}.get(
            status, (status, "generation")
        )
        return status, orjson.dumps({"error": message, "error_type": kind}), JSON_TYPE

    def invalid_json(self, message: str) -> Answer:
        text = f"Failed to parse the request body as JSON: {message}"  # axum's rejection
        return 400, text.encode(), "text/plain"

    def no_route(self, status: int, method: str, path: str) -> Answer:
        return status, b"", "text/plain"  # axum answers an empty body

    def metric_lines(self, model: str, load: LoadSnapshot) -> list[str]:
        """TGI's router metrics: per-request histograms observed as each request ends (only
        their ``+Inf`` bucket here), the batch and queue gauges, and the batch's token budget
        (prompt + max new tokens of each running request). No KV-cache or prefix-cache
        metric: TGI exports none."""
        lines = []
        for name, total in (
            ("tgi_request_input_length", load.finished_prompt_tokens),
            ("tgi_request_generated_tokens", load.finished_generation_tokens),
        ):
            lines += [
                f"# TYPE {name} histogram",
                f'{name}_bucket{{le="+Inf"}} {load.requests}',
                f"{name}_sum {total}",
                f"{name}_count {load.requests}",
            ]
        for name, value in (
            ("tgi_batch_current_size", load.running),
            ("tgi_queue_size", load.waiting),
            ("tgi_batch_current_max_tokens", load.reserved_tokens),
        ):
            lines += [f"# TYPE {name} gauge", f"{name} {value}"]
        return lines
