"""OpenAI's API personality (behind Cloudflare): Chat Completions and legacy Completions."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from loadgen.mock.personalities.base import (
    JSON_TYPE,
    Answer,
    Personality,
    StreamRequest,
    StreamShape,
)

_OPENAI_FINGERPRINT = b',"service_tier":"default","system_fingerprint":"fp_mock"'


class OpenAI(Personality):
    """OpenAI's API (behind Cloudflare): Chat Completions and legacy Completions."""

    name = "openai"
    keepalive_timeout_s = 75.0  # unconfirmed; aiohttp's default
    requires_auth = True
    tokenizer = None
    metrics = False
    prefix_cache_reset = None  # OpenAI's prompt cache is not the caller's to empty
    completion_end = b'","index":0,"logprobs":null,"finish_reason":null}],"model":'
    chat_end = b'"},"logprobs":null,"finish_reason":null}]'
    error_types: ClassVar[dict[int, str]] = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        500: "server_error",
        503: "server_error",
    }

    def _usage(self, r: StreamRequest) -> dict[str, Any]:
        return {
            "prompt_tokens": r.prompt_tokens,
            "completion_tokens": r.completion_tokens,
            "total_tokens": r.prompt_tokens + r.completion_tokens,
            "prompt_tokens_details": {
                "cached_tokens": max(r.cached_tokens, 0),
                "audio_tokens": 0,
            },
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def stream_shape(self, r: StreamRequest) -> StreamShape:
        usage_null = b',"usage":null' if r.include_usage else b""
        usage = orjson.dumps(self._usage(r))
        finish = b'"finish_reason":"%s"' % r.finish_reason.encode()
        if not r.chat:
            start = b'data: {"id":"%s","object":"text_completion","created":%d,"choices":[' % (
                r.request_id.encode(),
                r.created,
            )
            suffix = r.model_json + usage_null + b"}\n\n"
            final = start + b'{"text":"","index":0,"logprobs":null,' + finish + b'}],"model":'
            tail = final + suffix
            if r.include_usage:
                tail += start + b'],"model":' + r.model_json + b',"usage":' + usage + b"}\n\n"
            prefix = start + b'{"text":"'
            return StreamShape(
                b"", prefix, suffix, self.completion_end + suffix, tail + self.done()
            )
        start = self._start(r) + _OPENAI_FINGERPRINT + b',"choices":['
        # Random padding that hides token lengths; a per-request constant is as good here.
        obfuscation = b',"obfuscation":"%s"' % r.request_id[-10:].encode()
        suffix = usage_null + obfuscation + b"}\n\n"
        head = start + b'{"index":0,"delta":{"role":"assistant","content":"","refusal":null},'
        head += b'"logprobs":null,"finish_reason":null}]' + suffix
        tail = start + b'{"index":0,"delta":{},"logprobs":null,' + finish + b"}]" + suffix
        if r.include_usage:
            tail += start + b'],"usage":' + usage + obfuscation + b"}\n\n"
        prefix = start + b'{"index":0,"delta":{"content":"'
        return StreamShape(head, prefix, suffix, self.chat_end + suffix, tail + self.done())

    def response(self, r: StreamRequest, text: str) -> dict[str, Any]:
        if r.chat:
            message: dict[str, Any] = {
                "role": "assistant",
                "content": text,
                "refusal": None,
                "annotations": [],
            }
            choice: dict[str, Any] = {"index": 0, "message": message, "logprobs": None}
            choice["finish_reason"] = r.finish_reason
        else:
            choice = {"text": text, "index": 0, "logprobs": None, "finish_reason": r.finish_reason}
        body = {
            "id": r.request_id,
            "object": "chat.completion" if r.chat else "text_completion",
            "created": r.created,
            "model": r.model,
            "choices": [choice],
            "usage": self._usage(r),
        }
        if r.chat:
            body |= {"service_tier": "default", "system_fingerprint": "fp_mock"}
        return body

    def error(self, status: int, message: str, code: str | None = None) -> Answer:
        kind = self.error_types.get(status, "server_error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
        return status, orjson.dumps(body), JSON_TYPE

    def invalid_json(self, message: str) -> Answer:
        return self.error(400, "We could not parse the JSON body of your request.")

    def unknown_model(self, model: Any) -> Answer:
        message = f"The model `{model}` does not exist or you do not have access to it."
        return self.error(404, message, "model_not_found")

    def no_route(self, status: int, method: str, path: str) -> Answer:
        return self.error(404, f"Invalid URL ({path})")

    def unauthorized(self) -> Answer:
        """The answer to a request without an API key."""
        return self.error(401, "You didn't provide an API key.")
