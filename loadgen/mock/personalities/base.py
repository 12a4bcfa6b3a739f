"""What every personality is, and vLLM's, the default: the others override what differs.

A personality renders the bytes of streamed and whole responses, error bodies and ``/metrics``
text, and carries the server's defaults (idle keep-alive timeout, HTTP handler pool, start-up
behaviour). The handlers in :mod:`loadgen.mock.handlers` stay the same for every server;
docs/servers.md has the facts each one reproduces.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import orjson

from loadgen.mock.load import LoadSnapshot

TTFT_WIDTH = 12  # bytes reserved in a stream's tail for a TTFT measured when it is written
_TTFT_PLACEHOLDER = b"0" * TTFT_WIDTH
NO_IDLE_TIMEOUT_S = 86400.0  # servers that never close an idle keep-alive connection
JSON_TYPE = "application/json"


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
    cached_tokens: int = -1  # prompt tokens found in the prefix cache; -1: the mock keeps none


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


def fixed_width(value: float, width: int = TTFT_WIDTH) -> bytes:
    """``value`` (at most 1e9) as a JSON number of exactly ``width`` characters, its last
    decimals cut, so that a stream's Content-Length is known before the value is."""
    return f"{min(max(value, 0.0), 1e9):.{width}f}"[:width].encode()


def usage_dict(r: StreamRequest) -> dict[str, int]:
    """The OpenAI ``usage`` object of a response, in vLLM's key order."""
    return {
        "prompt_tokens": r.prompt_tokens,
        "total_tokens": r.prompt_tokens + r.completion_tokens,
        "completion_tokens": r.completion_tokens,
    }


Answer = tuple[int, bytes, str]  # status, body, content type


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
    # POST path that empties the prefix cache (docs/servers.md); None: the server has none
    prefix_cache_reset: ClassVar[str | None] = "/reset_prefix_cache"
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
                (start, b',"choices":[],"usage":', orjson.dumps(usage_dict(r)),
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
            "usage": usage_dict(r) | {"prompt_tokens_details": None},
        }

    # --- errors ---

    def error(self, status: int, message: str) -> Answer:
        """The answer to a request refused with ``status``."""
        kind = self.error_types.get(status, "Error")
        body = {"error": {"message": message, "type": kind, "param": None, "code": status}}
        return status, orjson.dumps(body), JSON_TYPE

    def invalid_json(self, message: str) -> Answer:
        """The answer to a body that is not JSON."""
        return self.error(400, message)

    def unknown_model(self, model: Any) -> Answer:
        """The answer to a request naming a model that is not served."""
        return self.error(404, f"The model `{model}` does not exist.")

    def no_route(self, status: int, method: str, path: str) -> Answer:
        """The answer to an unknown route (404) or method (405): FastAPI's."""
        detail = "Not Found" if status == 404 else "Method Not Allowed"
        return status, orjson.dumps({"detail": detail}), JSON_TYPE

    def loading(self) -> Answer:
        """The answer to every request while the model loads with the port open."""
        return self.error(503, "The model is loading.")

    def unauthorized(self) -> Answer:
        """The answer to a request without an API key, where one is required."""
        return self.error(401, "Unauthorized")

    def reset_answer(self) -> Answer:
        """The answer to the prefix-cache reset: vLLM's dev endpoint, 200 and an empty body."""
        return 200, b"", JSON_TYPE

    # --- /metrics ---

    def metric_lines(self, model: str, load: LoadSnapshot) -> list[str]:
        """Prometheus text lines of the server's load (loadgen/mock/load.py), as the server
        names them: vLLM's scheduler gauges and token counters (vllm/v1/metrics/loggers.py)."""
        labels = f'{{engine="0",model_name="{model}"}}'
        lines = prometheus_lines(
            "vllm",
            labels,
            (
                ("num_requests_running", "gauge", load.running),
                ("num_requests_waiting", "gauge", load.waiting),
                ("kv_cache_usage_perc", "gauge", load.kv_usage),
                ("num_preemptions_total", "counter", load.preemptions),
                ("prompt_tokens_total", "counter", load.prompt_tokens),
                ("generation_tokens_total", "counter", load.generation_tokens),
            ),
        )
        if load.cache_queried is not None and load.cache_hits is not None:
            lines += self.prefix_cache_lines(model, load.cache_queried, load.cache_hits)
        return lines

    def prefix_cache_lines(self, model: str, queried_tokens: int, hit_tokens: int) -> list[str]:
        """vLLM's prefix-cache counters, in tokens (the mock keeps a cache with
        --prefill-us-per-token)."""
        return prometheus_lines(
            "vllm",
            f'{{engine="0",model_name="{model}"}}',
            (
                ("prefix_cache_queries_total", "counter", queried_tokens),
                ("prefix_cache_hits_total", "counter", hit_tokens),
            ),
        )


def prometheus_lines(
    prefix: str, labels: str, samples: tuple[tuple[str, str, float], ...]
) -> list[str]:
    """Prometheus text lines: a TYPE line and one sample for each (name, kind, value); a
    counter's TYPE line names it without ``_total``, as prometheus_client writes it."""
    lines = []
    for name, kind, value in samples:
        family = name.removesuffix("_total") if kind == "counter" else name
        lines += [f"# TYPE {prefix}:{family} {kind}", f"{prefix}:{name}{labels} {float(value)}"]
    return lines
