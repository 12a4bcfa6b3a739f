"""llama.cpp's ``llama-server`` personality (cpp-httplib; nlohmann JSON)."""

from __future__ import annotations

import math
from typing import Any, ClassVar

import orjson

from loadgen.mock.load import LoadSnapshot
from loadgen.mock.personalities.base import (
    JSON_TYPE,
    Answer,
    Personality,
    StreamRequest,
    StreamShape,
)

_FINGERPRINT = b',"system_fingerprint":"b0-unknown"'  # llama.cpp's build info, unknown build


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # nlohmann writes inf and nan as null


class LlamaCpp(Personality):
    """llama.cpp's ``llama-server`` (cpp-httplib)."""

    name = "llamacpp"
    keepalive_timeout_s = 5.0
    http_threads = 8
    close_after_stream = True
    port_closed_while_loading = False
    checks_model = False
    tokenizer = "llamacpp"
    prefix_cache_reset = None  # a slot's erase needs --slot-save-path: none loadgen calls
    completion_end = b'","index":0,"logprobs":null,"finish_reason":null}],"created":'
    chat_end = b'"}}],"created":'
    error_types: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        500: "server_error",
        501: "not_supported_error",
        503: "unavailable_error",
    }

    def id_prefix(self, chat: bool) -> str:
        return "chatcmpl-"  # llama-server names every OpenAI-style response so

    def headers(self, keepalive_timeout_s: float) -> dict[str, str]:
        timeout = max(round(keepalive_timeout_s), 1)
        return {"Connection": "keep-alive", "Keep-Alive": f"timeout={timeout}, max=100"}

    def _usage(self, r: StreamRequest) -> bytes:
        return orjson.dumps(
            {
                "completion_tokens": r.completion_tokens,
                "prompt_tokens": r.prompt_tokens,
                "total_tokens": r.prompt_tokens + r.completion_tokens,
                "prompt_tokens_details": {"cached_tokens": max(r.cached_tokens, 0)},
            }
        )

    def _timings(self, r: StreamRequest) -> bytes:
        prompt_ms = r.ttft_ms
        predicted_ms = max(r.completion_tokens - 1, 0) * r.itl_ms
        cached = max(r.cached_tokens, 0)
        n, p = r.completion_tokens, r.prompt_tokens - cached  # prompt_n: the tokens evaluated
        return orjson.dumps(
            {
                "cache_n": cached,
                "prompt_n": p,
                "prompt_ms": prompt_ms,
                "prompt_per_token_ms": prompt_ms / p if p else None,
                "prompt_per_second": _finite(1e3 * p / prompt_ms) if prompt_ms else None,
                "predicted_n": n,
                "predicted_ms": predicted_ms,
                "predicted_per_token_ms": predicted_ms / n if n else None,
                "predicted_per_second": _finite(1e3 * n / predicted_ms) if predicted_ms else None,
            }
        )

    def stream_shape(self, r: StreamRequest) -> StreamShape:
        created, rid = str(r.created).encode(), r.request_id.encode()
        done = self.done()
        if not r.chat:
            suffix = b"".join(
                (created, b',"model":', r.model_json, _FINGERPRINT,
                 b',"object":"text_completion","id":"', rid, b'"}\n\n')
            )  # fmt: skip
            # The final chunk keeps its choices and carries usage and timings, always.
            final = b"".join(
                (b'data: {"choices":[{"text":"","index":0,"logprobs":null,"finish_reason":"',
                 r.finish_reason.encode(), b'"}],"created":', created, b',"model":', r.model_json,
                 _FINGERPRINT, b',"object":"text_completion","usage":', self._usage(r),
                 b',"id":"', rid, b'","timings":', self._timings(r), b"}\n\n")
            )  # fmt: skip
            prefix = b'data: {"choices":[{"text":"'
            return StreamShape(b"", prefix, suffix, self.completion_end + suffix, final + done)
        meta = b"".join(
            (created, b',"id":"', rid, b'","model":', r.model_json, _FINGERPRINT,
             b',"object":"chat.completion.chunk"')
        )  # fmt: skip
        suffix = meta + b"}\n\n"
        head = b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"role":"assistant",'
        head += b'"content":null}}],"created":' + suffix
        finish = b'data: {"choices":[{"finish_reason":"%s","index":0,"delta":{}}],"created":' % (
            r.finish_reason.encode()
        )
        tail = finish + suffix
        if r.include_usage:
            tail += b"".join(
                (b'data: {"choices":[],"created":', meta, b',"usage":', self._usage(r),
                 b',"timings":', self._timings(r), b"}\n\n")
            )  # fmt: skip
        prefix = b'data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":"'
        return StreamShape(head, prefix, suffix, self.chat_end + suffix, tail + done)

    def response(self, r: StreamRequest, text: str) -> dict[str, Any]:
        if r.chat:
            choices: list[dict[str, Any]] = [
                {
                    "finish_reason": r.finish_reason,
                    "index": 0,
                    "message": {"role": "assistant", "content": text},
                }
            ]
        else:
            choices = [
                {"text": text, "index": 0, "logprobs": None, "finish_reason": r.finish_reason}
            ]
        return {
            "choices": choices,
            "created": r.created,
            "model": r.model,
            "system_fingerprint": "b0-unknown",
            "object": "chat.completion" if r.chat else "text_completion",
            "usage": orjson.Fragment(self._usage(r)),
            "id": r.request_id,
            "timings": orjson.Fragment(self._timings(r)),
        }

    def error(self, status: int, message: str) -> Answer:
        kind = self.error_types.get(status, "server_error")
        body = {"error": {"code": status, "message": message, "type": kind}}
        return status, orjson.dumps(body), JSON_TYPE

    def invalid_json(self, message: str) -> Answer:
        return self.error(500, message)  # nlohmann's parse exception is a server_error

    def no_route(self, status: int, method: str, path: str) -> Answer:
        return self.error(404, "File Not Found")

    def loading(self) -> Answer:
        return self.error(503, "Loading model")

    def metric_lines(self, model: str, load: LoadSnapshot) -> list[str]:
        """llama-server's ``--metrics`` page (tools/server/server-context.cpp): no labels,
        integer values, counters typed under their own ``_total`` names; its prompt counter
        counts the tokens evaluated (the prefix cache's hits left out). Today's builds export
        no KV-cache gauge and no prefix-cache counter, so neither does the mock."""
        lines = []
        for kind, name, value in (
            ("counter", "prompt_tokens_total", load.prompt_computed),
            ("counter", "tokens_predicted_total", load.generation_tokens),
            ("gauge", "requests_processing", load.running),
            ("gauge", "requests_deferred", load.waiting),
        ):
            lines += [f"# TYPE llamacpp:{name} {kind}", f"llamacpp:{name} {value}"]
        return lines
