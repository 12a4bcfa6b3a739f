"""How each real server shapes its answers, for ``loadgen mock-server --personality``.

A personality renders the bytes of streamed and whole responses, error bodies and ``/metrics``
text, and carries the server's defaults (idle keep-alive timeout, HTTP handler pool, start-up
behaviour). vLLM's, llama.cpp's and SGLang's are here; TGI's, OpenAI's and the table of all are
in :mod:`loadgen.mock_personalities_tgi_openai`. The handlers in :mod:`loadgen.mock_server` stay
the same for every server; docs/servers.md has the facts each one reproduces.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

TTFT_WIDTH = 12  # bytes reserved in a stream's tail for a TTFT measured when it is written
_TTFT_PLACEHOLDER = b"0" * TTFT_WIDTH
NO_IDLE_TIMEOUT_S = 86400.0  # servers that never close an idle keep-alive connection
_FINGERPRINT = b',"system_fingerprint":"b0-unknown"'  # llama.cpp's build info, unknown build


@dataclass(slots=True)
class StreamRequest:
    """What a personality needs to know to render one generation response."""

    chat: bool
    request_id: str
    created: int
    model: str
    model_json: bytes  # the model name as a JSON string
    finish_reason: str
    prompt_tokens: int
    completion_tokens: int
    include_usage: bool
    ttft_ms: float
    itl_ms: float


@dataclass(slots=True)
class StreamShape:
    """The per-request bytes of one stream; token events are ``prefix + text + end + suffix``.

    ``end`` is the personality's constant fragment end (``completion_end``/``chat_end``), kept
    with each token's escaped text in the fragments the server precomputes.
    """

    head: bytes  # sent with token event 0 (a chat stream's role chunk)
    prefix: bytes
    suffix: bytes  # per-request bytes after the fragment end (b"" when the end closes the event)
    last_suffix: bytes  # replaces end + suffix on the final token event
    tail: bytes  # after the final token event: finish and usage chunks, [DONE]
    ttft_at: int = -1  # offset in tail of TTFT_WIDTH bytes for the measured TTFT, or -1
    last_prefix: bytes = b""  # replaces prefix on the final token event, when not empty


@dataclass(slots=True)
class TokenCounts:
    """The usage a server reported, summed, and its generation requests."""

    prompt: int = 0
    generated: int = 0
    requests: int = 0  # generation requests answered with usage
    running: int = 0  # generation requests being handled


def fixed_width(value: float, width: int = TTFT_WIDTH) -> bytes:
    """``value`` (at most 1e9) as a JSON number of exactly ``width`` characters, its last
    decimals cut, so that a stream's Content-Length is known before the value is."""
    return f"{min(max(value, 0.0), 1e9):.{width}f}"[:width].encode()


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None  # nlohmann writes inf and nan as null


def _usage(r: StreamRequest) -> dict[str, int]:
    return {
        "prompt_tokens": r.prompt_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
        "completion_tokens": r.completion_tokens,
    }


Answer = tuple[int, bytes, str]  # status, body, content type
_JSON = "application/json"


class Personality:
    """vLLM's answers (the default); other servers override what differs."""

    name: ClassVar[str] = "vllm"
    keepalive_timeout_s: ClassVar[float] = 5.0  # uvicorn's timeout_keep_alive
    http_threads: ClassVar[int] = 0  # handlers an idle connection holds; 0: unbounded
    close_after_stream: ClassVar[bool] = False
    port_closed_while_loading: ClassVar[bool] = True
    checks_model: ClassVar[bool] = True
    requires_auth: ClassVar[bool] = False
    tokenizer: ClassVar[str | None] = "vllm"  # the /tokenize form served, None: no endpoint
    metrics: ClassVar[bool] = True  # serves /metrics
    data: ClassVar[bytes] = b"data: "
    completion_end: ClassVar[bytes] = (
        b'","logprobs":null,"finish_reason":null,"stop_reason":null}]}\n\n'
    )
    chat_end: ClassVar[bytes] = b'"},"logprobs":null,"finish_reason":null}]}\n\n'
    error_types: ClassVar[dict[int, str]] = {
        400: "BadRequestError",
        401: "UnauthorizedError",
        404: "NotFoundError",
        500: "InternalServerError",
        503: "ServiceUnavailableError",
    }

    def id_prefix(self, chat: bool) -> str:
        """The response id's prefix."""
        return "chatcmpl-" if chat else "cmpl-"

    def answered_model(self, chat: bool, requested: Any, served: str) -> str:
        """The model name a response carries."""
        return served

    def done(self) -> bytes:
        """The stream's closing event."""
        return self.data + b"[DONE]\n\n"

    def headers(self, keepalive_timeout_s: float) -> dict[str, str]:
        """Headers added to every response."""
        return {}

    # --- generation ---

    def _start(self, r: StreamRequest) -> bytes:
        kind = b"chat.completion.chunk" if r.chat else b"text_completion"
        return b"".join(
            (self.data, b'{"id":"', r.request_id.encode(), b'","object":"', kind,
             b'","created":', str(r.created).encode(), b',"model":', r.model_json)
        )  # fmt: skip

    def stream_shape(self, r: StreamRequest) -> StreamShape:
        """The bytes framing one stream."""
        start = self._start(r)
        finish = b'"finish_reason":"%s","stop_reason":null}]}\n\n' % r.finish_reason.encode()
        tail, ttft_at = self.done(), -1
        if r.include_usage:
            usage = b"".join(
                (start, b',"choices":[],"usage":', orjson.dumps(_usage(r)),
                 b',"metrics":{"queue_time_ms":0.0,"time_to_first_token_ms":')
            )  # fmt: skip
            ttft_at = len(usage)
            tail = b"".join((usage, _TTFT_PLACEHOLDER, b"}}\n\n", tail))
        if r.chat:
            head = start + (
                b',"choices":[{"index":0,"delta":{"role":"assistant","content":""},'
                b'"logprobs":null,"finish_reason":null}]}\n\n'
            )
            prefix = start + b',"choices":[{"index":0,"delta":{"content":"'
            return StreamShape(head, prefix, b"", b'"},"logprobs":null,' + finish, tail, ttft_at)
        prefix = start + b',"choices":[{"index":0,"text":"'
        return StreamShape(b"", prefix, b"", b'","logprobs":null,' + finish, tail, ttft_at)

    def response(self, r: StreamRequest, text: str) -> dict[str, Any]:
        """A whole (non-streamed) response."""
        if r.chat:
            choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text}}
        else:
            choice = {"index": 0, "text": text}
        choice |= {"logprobs": None, "finish_reason": r.finish_reason, "stop_reason": None}
        return {
            "id": r.request_id,
            "object": "chat.completion" if r.chat else "text_completion",
            "created": r.created,
            "model": r.model,
            "choices": [choice],
            "usage": _usage(r) | {"prompt_tokens_details": None},
        }

    # --- errors ---

    def error(self, status: int, message: str) -> Answer:
        """The answer to a request refused with ``status``."""
        kind = self.error_types.get(status, "Error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
        return status, orjson.dumps(body), _JSON

    def invalid_json(self, message: str) -> Answer:
        """The answer to a body that is not JSON."""
        return self.error(400, message)

    def unknown_model(self, model: Any) -> Answer:
        """The answer to a request naming a model that is not served."""
        return self.error(404, f"The model `{model}` does not exist.")

    def no_route(self, status: int, method: str, path: str) -> Answer:
        """The answer to an unknown route (404) or method (405): FastAPI's."""
        detail = "Not Found" if status == 404 else "Method Not Allowed"
        return status, orjson.dumps({"detail": detail}), _JSON

    def loading(self) -> Answer:
        """The answer to every request while the model loads with the port open."""
        return self.error(503, "The model is loading.")

    def unauthorized(self) -> Answer:
        """The answer to a request without an API key, where one is required."""
        return self.error(401, "Unauthorized")

    # --- /metrics ---

    def metric_lines(self, model: str, counts: TokenCounts) -> list[str]:
        """Prometheus text lines of the token counters and running requests."""
        return prometheus_lines(
            "vllm",
            f'{{engine="0",model_name="{model}"}}',
            (
                ("num_requests_running", "gauge", float(counts.running)),
                ("prompt_tokens_total", "counter", float(counts.prompt)),
                ("generation_tokens_total", "counter", float(counts.generated)),
            ),
        )


def prometheus_lines(
    prefix: str, labels: str, samples: tuple[tuple[str, str, float], ...]
) -> list[str]:
    """Prometheus text lines: a TYPE line and one sample for each (name, kind, value)."""
    lines = []
    for name, kind, value in samples:
        lines += [f"# TYPE {prefix}:{name} {kind}", f"{prefix}:{name}{labels} {value}"]
    return lines


class LlamaCpp(Personality):
    """llama.cpp's ``llama-server`` (cpp-httplib)."""

    name = "llamacpp"
    keepalive_timeout_s = 5.0
    http_threads = 8
    close_after_stream = True
    port_closed_while_loading = False
    checks_model = False
    tokenizer = "llamacpp"
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
                "prompt_tokens_details": {"cached_tokens": 0},
            }
        )

    def _timings(self, r: StreamRequest) -> bytes:
        prompt_ms = r.ttft_ms
        predicted_ms = max(r.completion_tokens - 1, 0) * r.itl_ms
        n, p = r.completion_tokens, r.prompt_tokens
        return orjson.dumps(
            {
                "cache_n": 0,
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
        return status, orjson.dumps(body), _JSON

    def invalid_json(self, message: str) -> Answer:
        return self.error(500, message)  # nlohmann's parse exception is a server_error

    def no_route(self, status: int, method: str, path: str) -> Answer:
        return self.error(404, "File Not Found")

    def loading(self) -> Answer:
        return self.error(503, "Loading model")

    def metric_lines(self, model: str, counts: TokenCounts) -> list[str]:
        return prometheus_lines(
            "llamacpp",
            "",
            (
                ("prompt_tokens_total", "counter", counts.prompt),
                ("tokens_predicted_total", "counter", counts.generated),
                ("requests_processing", "gauge", counts.running),
                ("requests_deferred", "gauge", 0),
            ),
        )


class SGLang(Personality):
    """SGLang's ``launch_server`` (FastAPI on uvicorn; pydantic and msgspec chunks)."""

    name = "sglang"
    checks_model = False
    tokenizer = "sglang"
    completion_end = (
        b'","logprobs":null,"finish_reason":null,"matched_stop":null}],"usage":null}\n\n'
    )
    chat_end = b'"},"logprobs":null,"finish_reason":null,"matched_stop":null}]}\n\n'

    def answered_model(self, chat: bool, requested: Any, served: str) -> str:
        return requested if isinstance(requested, str) else "default"

    def _usage_chunk(self, start: bytes, r: StreamRequest) -> bytes:
        usage = _usage(r)
        if r.chat:  # pydantic keeps the nulls; the completions chunk excludes them
            usage["prompt_tokens_details"] = None  # type: ignore[assignment]
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
        usage = _usage(r) | {"prompt_tokens_details": None, "reasoning_tokens": 0}
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
        return status, orjson.dumps(body | {"code": status}), _JSON

    def metric_lines(self, model: str, counts: TokenCounts) -> list[str]:
        return prometheus_lines(
            "sglang",
            f'{{model_name="{model}"}}',
            (
                ("prompt_tokens_total", "counter", float(counts.prompt)),
                ("generation_tokens_total", "counter", float(counts.generated)),
                ("num_running_reqs", "gauge", float(counts.running)),
                ("num_queue_reqs", "gauge", 0.0),
            ),
        )
