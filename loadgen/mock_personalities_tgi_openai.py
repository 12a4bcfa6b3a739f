"""TGI's and OpenAI's personalities for the mock server, and the table of all personalities."""

from __future__ import annotations

from typing import Any, ClassVar

import orjson

from loadgen.mock_personalities import (
    NO_IDLE_TIMEOUT_S,
    Answer,
    LlamaCpp,
    Personality,
    SGLang,
    StreamRequest,
    StreamShape,
    TokenCounts,
)

_JSON = "application/json"
_TGI_FINGERPRINT = b',"system_fingerprint":"3.3.6-native"'
_OPENAI_FINGERPRINT = b',"service_tier":"default","system_fingerprint":"fp_mock"'


class TGI(Personality):
    """Hugging Face's text-generation-inference router (axum on hyper, serde_json chunks)."""

    name = "tgi"
    keepalive_timeout_s = NO_IDLE_TIMEOUT_S  # hyper sets no idle timeout
    checks_model = False
    tokenizer = "tgi"
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
        return status, orjson.dumps({"error": message, "error_type": kind}), _JSON

    def invalid_json(self, message: str) -> Answer:
        text = f"Failed to parse the request body as JSON: {message}"  # axum's rejection
        return 400, text.encode(), "text/plain"

    def no_route(self, status: int, method: str, path: str) -> Answer:
        return status, b"", "text/plain"  # axum answers an empty body

    def metric_lines(self, model: str, counts: TokenCounts) -> list[str]:
        lines = []
        for name, total in (
            ("tgi_request_input_length", counts.prompt),
            ("tgi_request_generated_tokens", counts.generated),
        ):
            lines += [
                f"# TYPE {name} histogram",
                f'{name}_bucket{{le="+Inf"}} {counts.requests}',
                f"{name}_sum {total}",
                f"{name}_count {counts.requests}",
            ]
        lines += [
            "# TYPE tgi_batch_current_size gauge",
            f"tgi_batch_current_size {counts.running}",
            "# TYPE tgi_queue_size gauge",
            "tgi_queue_size 0",
        ]
        return lines


class OpenAI(Personality):
    """OpenAI's API (behind Cloudflare): Chat Completions and legacy Completions."""

    name = "openai"
    keepalive_timeout_s = 75.0  # unconfirmed; aiohttp's default
    requires_auth = True
    tokenizer = None
    metrics = False
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
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
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
            message = {"role": "assistant", "content": text, "refusal": None, "annotations": []}
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
        return status, orjson.dumps(body), _JSON

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


PERSONALITIES: dict[str, Personality] = {
    p.name: p for p in (Personality(), LlamaCpp(), SGLang(), TGI(), OpenAI())
}
