"""An OpenAI-compatible mock inference server (aiohttp + uvloop) for tests, demos and benchmarks.

It answers /v1/completions and /v1/chat/completions (streamed or not) with a deterministic cycle
of ordinary tokens, after a configurable time to first token and inter-token latency, and counts
prompt tokens with a real tokenizer so that usage figures are exact. /v1/embeddings and /pooling
answer one fixed vector per input after the time to first token (floats, or raw float32 with
``encoding_format`` bytes or bytes_only, as vLLM sends them); /rerank (also under /v1 and /v2)
scores each document against the query. With ``--record-timings`` it
also records, on ``time.perf_counter_ns()``, when each generation request reached its handler and
when each token event was written, so that a client's measurements can be checked against them.
Each server's shapes and connection habits live in loadgen/mock_personalities*.py and
loadgen/mock_connections.py. This module is over 500 lines because it still holds config,
handlers, pacing and the timing recorder together; issue 13 splits it into a mock/ package.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import heapq
import io
import itertools
import math
import os
import random
import re
import secrets
import signal
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from time import perf_counter_ns
from typing import Any

import click
import numpy as np
import orjson
import uvloop
from aiohttp import web
from click.core import ParameterSource
from tokenizers import Encoding, Tokenizer

from loadgen.mock_connections import ConnectionHabits
from loadgen.mock_personalities import (
    TTFT_WIDTH,
    Answer,
    Personality,
    StreamRequest,
    TokenCounts,
    fixed_width,
)
from loadgen.mock_personalities_tgi_openai import PERSONALITIES
from loadgen.tokenizer import MOCK_MODEL_NAME, TokenizerLoadError, load_tokenizer

# Longer prompts are encoded in the default executor so that other requests' streams keep flowing.
EXECUTOR_ENCODE_CHARS = 4096
MAX_CYCLE_TOKENS = 1024
LISTEN_BACKLOG = 4096
MAX_BODY_BYTES = 64 * 1024 * 1024
IDLE_GC_TICK_S = 0.5

_JSON = "application/json"
# What Starlette (and so vLLM) sends for an event stream.
_SSE_HEADERS = {"Content-Type": "text/event-stream; charset=utf-8"}
_WORD_TOKEN = re.compile(r" [A-Za-z]{2,}")


@dataclass
class MockConfig:
    """Behaviour of the mock server."""

    model: str = MOCK_MODEL_NAME
    tokenizer: str = MOCK_MODEL_NAME
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    output_len: int = 128  # the length a response has when the "model" stops by itself
    startup_delay_s: float = 0.0
    error_rate: float = 0.0
    seed: int = 0
    max_model_len: int = 131072
    record_timings: Path | None = None  # where the timing records go at shutdown
    unavailable_for_s: float = 0.0  # after the port opens, answer 503 for this long
    empty_model_list: bool = False  # /v1/models lists no model, like a gateway without backends
    personality: str = "vllm"  # the real server whose answers and habits are reproduced
    keepalive_timeout_s: float | None = None  # idle connections close after this; None: the
    # personality's (NO_IDLE_TIMEOUT_S for a server that never closes them)
    http_threads: int | None = None  # connection handlers; 0: unbounded; None: the personality's
    lora_names: tuple[str, ...] = ()  # LoRA adapters served besides the model
    embedding_dim: int = 384  # floats per vector answered by /v1/embeddings and /pooling
    spec_decode_draft_tokens: int = 0  # >0: /metrics counts drafts of this many tokens


class _RequestError(Exception):
    """Turned into the personality's error response by the handler that catches it."""

    def __init__(self, status: int, message: str, answer: Answer | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.answer = answer  # a whole answer, when not the personality's error(status, message)


STATS_PATH = "/mock/stats"


def render_chat(messages: Any) -> str:
    """Render chat messages as ``"role: text\\n"`` lines, the prompt text the mock tokenizes.

    List contents contribute their ``text`` parts only; other parts (images, ...) are ignored.
    """
    if not isinstance(messages, list) or not messages:
        raise _RequestError(400, "messages must be a non-empty list")
    lines = []
    for message in messages:
        if not isinstance(message, dict):
            raise _RequestError(400, "each message must be an object")
        content = message.get("content")
        if isinstance(content, list):
            content = "".join(
                part.get("text", "")
                for part in content
                if isinstance(part, dict) and part.get("type") == "text"
            )
        elif content is None:
            content = ""
        elif not isinstance(content, str):
            raise _RequestError(400, "message content must be a string or a list of parts")
        lines.append(f"{message.get('role', 'user')}: {content}\n")
    return "".join(lines)


def _token_cycle(tokenizer: Tokenizer) -> list[int]:
    """Ordinary word tokens that decode on their own and re-encode to themselves.

    Re-encoding the generated text then gives back exactly the generated token count.
    """
    special = set(tokenizer.get_added_tokens_decoder())
    words, printable = [], []
    for token_id in range(tokenizer.get_vocab_size()):
        if token_id in special:
            continue
        text = tokenizer.decode([token_id])
        if _WORD_TOKEN.fullmatch(text):
            if tokenizer.encode(text, add_special_tokens=False).ids == [token_id]:
                words.append(token_id)
                if len(words) == MAX_CYCLE_TOKENS:
                    break
        elif len(printable) < MAX_CYCLE_TOKENS and text.strip() and text.isprintable():
            printable.append(token_id)
    cycle = words or printable
    if not cycle:
        raise TokenizerLoadError("the tokenizer has no ordinary printable tokens to generate")
    return cycle


def _int_param(body: dict[str, Any], key: str, minimum: int) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise _RequestError(400, f"{key} must be an integer, got {value!r}.")
    if value < minimum:
        raise _RequestError(400, f"{key} must be at least {minimum}, got {value}.")
    return value


@dataclass(slots=True)
class _Events:
    """The SSE bytes of one streamed response, built from precomputed fragments."""

    head: bytes  # sent before the first token event (chat's role chunk)
    prefix: bytes  # per-request event start, up to the opening quote of the token text
    fragments: list[bytes]  # escaped token text + event end, per cycle position
    fragment_offsets: list[int]  # prefix sums of the fragments' lengths
    escaped: list[bytes]
    last_suffix: bytes  # event end of the final token event, with its finish_reason
    tail: bytes  # usage chunk (if asked for) and [DONE]
    n: int
    ttft_at: int = -1  # offset in tail of the TTFT measured at the first write, or -1
    arrival_ns: int = 0  # the request's arrival, for that TTFT
    first_ns: int = 0  # when token event 0 was rendered, with ttft_at set
    last_prefix: bytes = b""  # the final token event's start, when not prefix

    def size(self) -> int:
        """The length in bytes of the whole stream, ``len(self.render(0, self.n))``."""
        full, rest = divmod(self.n - 1, len(self.fragments))
        return (
            len(self.head)
            + self.n * len(self.prefix)
            + len(self.last_prefix or self.prefix)
            - len(self.prefix)
            + full * self.fragment_offsets[-1]
            + self.fragment_offsets[rest]
            + len(self.escaped[(self.n - 1) % len(self.fragments)])
            + len(self.last_suffix)
            + len(self.tail)
        )

    def render(self, start: int, stop: int) -> bytes:
        """The bytes of token events ``start`` to ``stop - 1``, with head and tail as due."""
        prefix, fragments, size = self.prefix, self.fragments, len(self.fragments)
        if stop == start + 1 and 0 < start < self.n - 1:  # a paced stream's usual event
            return prefix + fragments[start % size]
        parts = [self.head] if start == 0 else []
        if start == 0 and self.ttft_at >= 0:
            self.first_ns = perf_counter_ns()
        for k in range(start, min(stop, self.n - 1)):
            parts.append(prefix)
            parts.append(fragments[k % size])
        if stop >= self.n:
            last_prefix = self.last_prefix or prefix
            parts += (last_prefix, self.escaped[(self.n - 1) % size], self.last_suffix, self.last())
        return b"".join(parts)

    def last(self) -> bytes:
        """The tail, with the measured TTFT written into its placeholder."""
        if self.ttft_at < 0:
            return self.tail
        at, ttft_ms = self.ttft_at, (self.first_ns - self.arrival_ns) / 1e6
        return self.tail[:at] + fixed_width(ttft_ms) + self.tail[at + TTFT_WIDTH :]


@dataclass(slots=True)
class _SuffixEvents(_Events):
    """Events whose token text is followed by per-request bytes (ids, created, model)."""

    suffix: bytes = b""  # after each non-final token event's fragment

    def size(self) -> int:
        """The length in bytes of the whole stream."""
        return _Events.size(self) + (self.n - 1) * len(self.suffix)

    def render(self, start: int, stop: int) -> bytes:
        """The bytes of token events ``start`` to ``stop - 1``, with head and tail as due."""
        prefix, fragments, suffix = self.prefix, self.fragments, self.suffix
        size = len(fragments)
        if stop == start + 1 and 0 < start < self.n - 1:
            return prefix + fragments[start % size] + suffix
        parts = [self.head] if start == 0 else []
        if start == 0 and self.ttft_at >= 0:
            self.first_ns = perf_counter_ns()
        for k in range(start, min(stop, self.n - 1)):
            parts += (prefix, fragments[k % size], suffix)
        if stop >= self.n:
            last_prefix = self.last_prefix or prefix
            parts += (last_prefix, self.escaped[(self.n - 1) % size], self.last_suffix, self.last())
        return b"".join(parts)


@dataclass(slots=True, eq=False)
class _PacedStream:
    """A streamed response whose token events the pacer writes."""

    transport: asyncio.Transport
    events: _Events
    first_ms: float  # loop clock, in ms, when token event 0 is due; event k is due ITL * k later
    head_events: int  # 1 when the role chunk goes out with token event 0 (chat), else 0
    record: array | None
    done: asyncio.Future[None]  # resolved once the last event is written or the client is gone
    sent: int = 0  # token events written so far
    # Read nothing more once the last event is out: a request the client sends right after it
    # is never seen by a server that closes after each stream (llama.cpp).
    stop_reading: bool = False


# Slack for float error when clock readings and deadlines are rounded to whole milliseconds.
_MS_EPS = 1e-3


class _Pacer:
    """Writes the due token events of every paced stream from one timer, a tick per millisecond.

    Streams wait in buckets keyed by the millisecond of the loop clock at which their next event
    is due (the first at or after the deadline); one timer is armed for the earliest bucket. A
    tick writes the due events of every stream in the buckets that are due, so an event costs no
    timer, future or task switch of its own. uvloop's clock and timers count whole milliseconds,
    so per-stream sleeps were no more precise than these ticks.
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, itl_ms: float) -> None:
        self.loop = loop
        self.itl_ms = itl_ms
        self.buckets: dict[int, list[_PacedStream]] = {}
        self.keys: list[int] = []  # heap of the buckets' keys
        self.timer: asyncio.TimerHandle | None = None
        self.timer_key = 0  # the bucket the timer is armed for (or, in a tick, is serving)

    def now_ms(self) -> float:
        """The loop clock in milliseconds."""
        return self.loop.time() * 1000.0

    def start(self, stream: _PacedStream) -> None:
        """Write what is already due of a new stream at once, and schedule the rest."""
        now = self.now_ms()
        key = math.ceil(stream.first_ms - _MS_EPS)
        if key <= math.floor(now + _MS_EPS):
            self._write_due(stream, now, key)
        else:
            self._schedule(stream, key)

    def _schedule(self, stream: _PacedStream, key: int) -> None:
        """Put a stream in bucket ``key``, arming the timer for it if it is the earliest."""
        bucket = self.buckets.get(key)
        if bucket is not None:
            bucket.append(stream)
            return
        self.buckets[key] = [stream]
        heapq.heappush(self.keys, key)
        # In a tick, keys scheduled are past the one served, so the timer is left to the tick.
        if self.timer is None or key < self.timer_key:
            if self.timer is not None:
                self.timer.cancel()
            self._arm(key)

    def _arm(self, key: int) -> None:
        self.timer = self.loop.call_at(key / 1000.0, self._tick)
        self.timer_key = key

    def _tick(self) -> None:
        """Write the due events of every stream whose bucket is due, then re-arm the timer."""
        now = self.now_ms()
        # asyncio may run a timer a hair before its time (clock resolution); it is due then.
        limit = max(math.floor(now + _MS_EPS), self.timer_key)
        keys, buckets = self.keys, self.buckets
        while keys and keys[0] <= limit:
            for stream in buckets.pop(heapq.heappop(keys)):
                if not stream.done.done():  # else its handler was cancelled (server shutdown)
                    self._write_due(stream, now, limit)
        self.timer = None
        if keys:
            self._arm(keys[0])

    def _write_due(self, stream: _PacedStream, now: float, limit: int) -> None:
        """Write the stream's next event and any others due by ``now``; then schedule or end it.

        The stream's next bucket is after ``limit``, the last one this tick serves.
        """
        transport = stream.transport
        if transport.is_closing():  # the client went away mid-stream
            stream.done.set_result(None)
            return
        events, sent = stream.events, stream.sent
        # A server that fell behind sends every token that is already due at once.
        upto = int((now - stream.first_ms) / self.itl_ms) + 1
        if upto <= sent:  # the tick came a hair early
            upto = sent + 1
        elif upto > events.n:
            upto = events.n
        data = events.render(sent, upto)
        if stream.record is not None:
            count = upto - sent + (stream.head_events if sent == 0 else 0)
            instant = perf_counter_ns()
            if count == 1:
                stream.record.append(instant)
            else:
                stream.record.extend(itertools.repeat(instant, count))
        transport.write(data)
        stream.sent = upto
        if upto == events.n:
            if stream.stop_reading:
                transport.pause_reading()
            stream.done.set_result(None)
            return
        key = math.ceil(stream.first_ms + upto * self.itl_ms - _MS_EPS)
        bucket = self.buckets.get(key) if key > limit else None
        if bucket is not None:  # the usual case, inlined: a bucket that already exists
            bucket.append(stream)
        else:
            self._schedule(stream, max(key, limit + 1))


class TimingRecorder:
    """Server-side instants of generation requests, on ``time.perf_counter_ns()``.

    Per request: its id, its arrival (handler entry) and one instant per choices-bearing SSE
    event, taken right before the write that carried it (events of one write share it).
    """

    def __init__(self) -> None:
        self.request_ids: list[str] = []
        self.arrival_ns = array("q")
        self.event_ns: list[array] = []

    def add(self, request_id: str, arrival_ns: int) -> array:
        """Record a request's arrival; return the array its event instants are appended to."""
        events = array("q")
        self.request_ids.append(request_id)
        self.arrival_ns.append(arrival_ns)
        self.event_ns.append(events)
        return events

    def arrays(self) -> dict[str, np.ndarray]:
        """The records as arrays: ``request_ids``, ``arrival_ns``, ``event_offsets``, ``event_ns``.

        Request i's event instants are ``event_ns[event_offsets[i]:event_offsets[i + 1]]``.
        """
        counts = [len(events) for events in self.event_ns]
        offsets = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(counts, out=offsets[1:])
        events = np.empty(int(offsets[-1]), dtype=np.int64)
        for i, chunk in enumerate(self.event_ns):
            events[offsets[i] : offsets[i + 1]] = np.frombuffer(chunk, dtype=np.int64)
        return {
            "request_ids": np.array(self.request_ids, dtype=np.str_),
            "arrival_ns": np.frombuffer(self.arrival_ns, dtype=np.int64).copy(),
            "event_offsets": offsets,
            "event_ns": events,
        }

    def npz(self) -> bytes:
        """The records as an uncompressed ``.npz`` archive (loads without pickle)."""
        buffer = io.BytesIO()
        np.savez(buffer, **self.arrays())
        return buffer.getvalue()

    def save(self, path: Path) -> None:
        """Write the ``.npz`` archive to ``path`` (through a temporary file, then renamed)."""
        partial = path.with_name(path.name + ".partial")
        partial.write_bytes(self.npz())
        os.replace(partial, path)


RECORDER_KEY = web.AppKey("recorder", TimingRecorder)


class _MockServer:
    """Request handlers and the state they share."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.personality: Personality = PERSONALITIES[config.personality]
        personality = self.personality
        self.keepalive_timeout_s = config.keepalive_timeout_s or personality.keepalive_timeout_s
        threads = config.http_threads
        self.connections = ConnectionHabits(
            handlers=personality.http_threads if threads is None else threads,
            keepalive_timeout_s=self.keepalive_timeout_s,
            close_delay_ms=(0.3, 0.7) if personality.close_after_stream else None,
            seed=config.seed,
        )
        self.extra_headers = personality.headers(self.keepalive_timeout_s)
        self.tokenizer = load_tokenizer(config.tokenizer)
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.rng = random.Random(config.seed)
        self.ttft_s = config.ttft_ms / 1000.0
        self.itl_s = config.itl_ms / 1000.0
        self.model_json = orjson.dumps(config.model)
        self.id_base = secrets.token_hex(8)
        self.counter = itertools.count()
        self.recorder = TimingRecorder() if config.record_timings is not None else None
        self.pacer: _Pacer | None = None  # made in the running loop, by the first paced stream
        self.requests_seen: dict[str, int] = {}  # "METHOD /path" -> requests, 503s included
        self.in_flight = 0  # requests being handled (a stream until its last write)
        self.max_in_flight = 0
        self.served = 0  # requests whose handling ended (answers of any status)
        self.counts = TokenCounts()  # usage reported by generation responses, summed
        self.loading_until = 0.0  # time.monotonic() until which the model "loads" (port open)
        self.gate_until = 0.0  # the later of that and the end of --unavailable-for
        # Speculative-decoding counters, as vLLM's /metrics reports them (--spec-decode-...).
        self.spec_drafts = 0
        self.spec_accepted_per_pos = [0] * config.spec_decode_draft_tokens
        self.opened_at: float | None = None  # time.monotonic() when the port opened
        vector = np.random.default_rng(config.seed).standard_normal(config.embedding_dim)
        vector /= np.linalg.norm(vector)  # unit length, as embedding models normalise
        self.vector = vector.tolist()
        self.vector_bytes = vector.astype("<f4").tobytes()

        cycle = _token_cycle(self.tokenizer)
        texts = [self.tokenizer.decode([token_id]) for token_id in cycle]
        self.cycle_text = "".join(texts)
        self.cycle_offsets = list(itertools.accumulate((len(t) for t in texts), initial=0))
        self.escaped = [orjson.dumps(t)[1:-1] for t in texts]
        self.completion_fragments = [e + personality.completion_end for e in self.escaped]
        self.chat_fragments = [e + personality.chat_end for e in self.escaped]
        self.completion_offsets = list(
            itertools.accumulate((len(f) for f in self.completion_fragments), initial=0)
        )
        self.chat_offsets = list(
            itertools.accumulate((len(f) for f in self.chat_fragments), initial=0)
        )
        self.models_body = orjson.dumps(
            {
                "object": "list",
                "data": []
                if config.empty_model_list
                else [
                    {
                        "id": config.model,
                        "object": "model",
                        "created": int(time.time()),
                        "owned_by": "loadgen",
                        "root": config.model,
                        "parent": None,
                        "max_model_len": config.max_model_len,
                    }
                ],
            }
        )

    # --- helpers ---

    def _error(self, status: int, message: str) -> web.Response:
        """An error answer in the personality's shape."""
        return _answer(self.personality.error(status, message))

    def _reject(self, exc: _RequestError) -> web.Response:
        """The answer to a request refused with ``exc``."""
        return _answer(exc.answer or self.personality.error(exc.status, exc.message))

    def mark_open(self) -> None:
        """Start the clocks of --unavailable-for and, where the port opens at once, loading."""
        self.opened_at = now = time.monotonic()
        if not self.personality.port_closed_while_loading:
            self.loading_until = now + self.config.startup_delay_s
        unavailable_until = now + self.config.unavailable_for_s
        self.gate_until = max(self.loading_until, unavailable_until)

    async def _json_body(self, request: web.Request) -> dict[str, Any]:
        try:
            body = orjson.loads(await request.read())
        except orjson.JSONDecodeError as exc:
            message = f"Invalid JSON body: {exc}"
            raise _RequestError(400, message, self.personality.invalid_json(message)) from None
        if not isinstance(body, dict):
            raise _RequestError(400, "The request body must be a JSON object.")
        return body

    def _check_model(self, body: dict[str, Any], required: bool) -> None:
        model = body.get("model")
        if model == self.config.model or model in self.config.lora_names:
            return
        if (model is None and not required) or not self.personality.checks_model:
            return
        raise _RequestError(404, "unknown model", self.personality.unknown_model(model))

    async def _encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        if len(text) <= EXECUTOR_ENCODE_CHARS:
            return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        encode = functools.partial(
            self.tokenizer.encode, text, add_special_tokens=add_special_tokens
        )
        return await asyncio.get_running_loop().run_in_executor(None, encode)

    def _check_token_ids(self, ids: list[Any]) -> list[int]:
        if set(map(type, ids)) != {int}:
            raise _RequestError(400, "token id lists must hold integers only")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise _RequestError(400, f"token ids must be in [0, {self.vocab_size})")
        return ids

    async def _prompt_tokens(self, body: dict[str, Any], chat: bool) -> int:
        if chat:
            return len((await self._encode(render_chat(body.get("messages")))).ids)
        prompt = body.get("prompt")
        # A batch of prompts is served as its first prompt.
        if isinstance(prompt, list) and prompt and isinstance(prompt[0], str | list):
            prompt = prompt[0]
        if isinstance(prompt, str):
            return len((await self._encode(prompt)).ids)
        if isinstance(prompt, list) and prompt:
            return len(self._check_token_ids(prompt))
        raise _RequestError(400, "prompt must be a string or a non-empty list of token ids")

    async def _pooling_prompt_tokens(self, body: dict[str, Any]) -> list[int]:
        """The token count of each input of a pooling request (messages count as one)."""
        if "messages" in body:
            return [len((await self._encode(render_chat(body["messages"]))).ids)]
        inputs = body.get("input")
        if isinstance(inputs, str) or (
            isinstance(inputs, list) and inputs and isinstance(inputs[0], int)
        ):
            inputs = [inputs]
        if not isinstance(inputs, list) or not inputs:
            raise _RequestError(400, "input must be a string, token ids, or a non-empty list")
        counts = []
        for item in inputs:
            if isinstance(item, str):
                counts.append(len((await self._encode(item)).ids))
            elif isinstance(item, list) and item:
                counts.append(len(self._check_token_ids(item)))
            else:
                raise _RequestError(400, "each input must be a string or a list of token ids")
        return counts

    def _length_limits(self, body: dict[str, Any], chat: bool) -> tuple[int | None, int]:
        """The request's max_tokens (None when absent) and min_tokens, validated."""
        max_tokens = None
        if chat:
            max_tokens = _int_param(body, "max_completion_tokens", minimum=1)
        if max_tokens is None:
            max_tokens = _int_param(body, "max_tokens", minimum=1)
        min_tokens = _int_param(body, "min_tokens", minimum=0) or 0
        if max_tokens is not None and min_tokens > max_tokens:
            raise _RequestError(
                400,
                f"min_tokens must be less than or equal to max_tokens={max_tokens}, "
                f"got {min_tokens}.",
            )
        return max_tokens, min_tokens

    def _output_len(
        self, max_tokens: int | None, min_tokens: int, ignore_eos: bool, prompt_tokens: int
    ) -> tuple[int, str]:
        """The number of tokens to generate and the finish_reason of the last one."""
        max_model_len = self.config.max_model_len
        room = max_model_len - prompt_tokens
        if room < 1:
            raise _RequestError(
                400,
                f"This model's maximum context length is {max_model_len} tokens. "
                f"However, your request has {prompt_tokens} input tokens. "
                "Please reduce the length of the input messages.",
            )
        if max_tokens is not None and max_tokens > room:
            raise _RequestError(
                400,
                f"'max_tokens' or 'max_completion_tokens' is too large: {max_tokens}. "
                f"This model's maximum context length is {max_model_len} tokens "
                f"and your request has {prompt_tokens} input tokens "
                f"({max_tokens} > {max_model_len} - {prompt_tokens}).",
            )
        natural = min(max(min_tokens, self.config.output_len), room)
        if ignore_eos:
            return (max_tokens if max_tokens is not None else natural), "length"
        if max_tokens is not None and max_tokens < natural:
            return max_tokens, "length"
        return natural, "stop"

    def _text(self, n: int) -> str:
        full, rest = divmod(n, len(self.escaped))
        return self.cycle_text * full + self.cycle_text[: self.cycle_offsets[rest]]

    # --- handlers ---

    async def health(self, request: web.Request) -> web.Response:
        """GET /health: 200 with an empty body."""
        return web.Response()

    async def models(self, request: web.Request) -> web.Response:
        """GET /v1/models: the one served model."""
        return web.Response(body=self.models_body, content_type=_JSON)

    async def completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/completions."""
        return await self._generate(request, chat=False)

    async def chat_completions(self, request: web.Request) -> web.StreamResponse:
        """POST /v1/chat/completions."""
        return await self._generate(request, chat=True)

    async def embeddings(self, request: web.Request) -> web.Response:
        """POST /v1/embeddings: one vector per input, after the time to first token."""
        return await self._pool(request, "embedding")

    async def pooling(self, request: web.Request) -> web.Response:
        """POST /pooling: vLLM's pooling API, answered as /v1/embeddings is."""
        return await self._pool(request, "pooling")

    async def _pool(self, request: web.Request, kind: str) -> web.Response:
        try:
            body = await self._json_body(request)
            self._check_model(body, required=True)
            counts = await self._pooling_prompt_tokens(body)
            encoding_format = body.get("encoding_format", "float")
            if encoding_format not in ("float", "bytes", "bytes_only"):
                raise _RequestError(400, f"unsupported encoding_format: {encoding_format}")
        except _RequestError as exc:
            return self._reject(exc)
        if self.config.error_rate > 0 and self.rng.random() < self.config.error_rate:
            return self._error(500, "Injected error (mock server --error-rate).")
        await asyncio.sleep(self.ttft_s)
        prompt_tokens = sum(counts)
        usage = {
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens,
            "completion_tokens": 0,
            "prompt_tokens_details": None,
        }
        head = {
            "id": f"{'embd' if kind == 'embedding' else 'pool'}-{self.id_base}"
            f"{next(self.counter):016x}",
            "object": "list",
            "created": int(time.time()),
            "model": self.config.model,
        }
        if encoding_format != "float":
            headers = {}
            if encoding_format == "bytes":  # bytes_only answers carry no usage at all
                headers["metadata"] = orjson.dumps(head | {"usage": usage}).decode()
            return web.Response(
                body=self.vector_bytes * len(counts),
                content_type="application/octet-stream",
                headers=headers,
            )
        vector_key = "embedding" if kind == "embedding" else "data"
        data = [{"index": i, "object": kind, vector_key: self.vector} for i in range(len(counts))]
        return web.Response(
            body=orjson.dumps(head | {"data": data, "usage": usage}), content_type=_JSON
        )

    async def rerank(self, request: web.Request) -> web.Response:
        """POST /rerank, /v1/rerank, /v2/rerank: the documents scored against the query (each
        pair counted as a cross-encoder reads it: query tokens plus document tokens), best
        first, after the time to first token."""
        try:
            body = await self._json_body(request)
            self._check_model(body, required=True)
            query, documents = body.get("query"), body.get("documents")
            if not isinstance(query, str):
                raise _RequestError(400, "query must be a string")
            if not isinstance(documents, list) or not documents:
                raise _RequestError(400, "documents must be a non-empty list")
            if not all(isinstance(d, str) for d in documents):
                raise _RequestError(400, "each document must be a string")
            query_tokens = len((await self._encode(query)).ids)
            doc_tokens = [len((await self._encode(d)).ids) for d in documents]
        except _RequestError as exc:
            return self._reject(exc)
        if self.config.error_rate > 0 and self.rng.random() < self.config.error_rate:
            return self._error(500, "Injected error (mock server --error-rate).")
        await asyncio.sleep(self.ttft_s)
        prompt_tokens = query_tokens * len(documents) + sum(doc_tokens)
        scores = [1.0 / (1 + i) for i in range(len(documents))]  # deterministic, in (0, 1]
        response = {
            "id": f"rerank-{self.id_base}{next(self.counter):016x}",
            "model": self.config.model,
            "usage": {"prompt_tokens": prompt_tokens, "total_tokens": prompt_tokens},
            "results": [
                {"index": i, "document": {"text": documents[i]}, "relevance_score": scores[i]}
                for i in range(len(documents))
            ],
        }
        return web.Response(body=orjson.dumps(response), content_type=_JSON)

    @web.middleware
    async def count_and_gate(self, request: web.Request, handler: Any) -> web.StreamResponse:
        """Count every request by method and path; answer 503 while the model loads (with the
        port open) or --unavailable-for lasts; answer unknown routes in the personality's shape."""
        if request.path == STATS_PATH:
            return await handler(request)
        if self.connections.waiting:
            await self.connections.wait_for_handler(request.protocol)
        key = f"{request.method} {request.path}"
        self.requests_seen[key] = self.requests_seen.get(key, 0) + 1
        if self.gate_until and time.monotonic() < self.gate_until:
            self.served += 1
            if time.monotonic() < self.loading_until:
                return _answer(self.personality.loading())
            return self._error(503, "The model is loading (mock server --unavailable-for).")
        if self.personality.requires_auth and not request.headers.get(
            "Authorization", ""
        ).startswith("Bearer "):
            self.served += 1
            return _answer(self.personality.unauthorized())
        self.in_flight += 1
        self.max_in_flight = max(self.max_in_flight, self.in_flight)
        try:
            return await handler(request)
        except (web.HTTPNotFound, web.HTTPMethodNotAllowed) as exc:
            return _answer(self.personality.no_route(exc.status, request.method, key))
        finally:
            self.in_flight -= 1
            self.served += 1

    def _count_drafts(self, tokens: int) -> None:
        """With --spec-decode-draft-tokens K: one draft of K tokens per generated token, of
        which the first K // 2 are accepted (a 50 % acceptance rate for even K)."""
        if self.spec_accepted_per_pos:
            self.spec_drafts += tokens
            for pos in range(len(self.spec_accepted_per_pos) // 2):
                self.spec_accepted_per_pos[pos] += tokens

    async def metrics(self, request: web.Request) -> web.Response:
        """GET /metrics: Prometheus text; with --spec-decode-draft-tokens, vLLM's spec-decode
        counters."""
        lines = ["# TYPE loadgen_mock_requests_total counter"]
        lines.append(f"loadgen_mock_requests_total {sum(self.requests_seen.values())}")
        lines += self.personality.metric_lines(self.config.model, self.counts)
        if self.spec_accepted_per_pos:
            labels = f'engine="0",model_name="{self.config.model}"'
            draft_tokens = self.spec_drafts * len(self.spec_accepted_per_pos)
            lines += [
                f"vllm:spec_decode_num_drafts_total{{{labels}}} {self.spec_drafts}",
                f"vllm:spec_decode_num_draft_tokens_total{{{labels}}} {draft_tokens}",
                "vllm:spec_decode_num_accepted_tokens_total"
                f"{{{labels}}} {sum(self.spec_accepted_per_pos)}",
            ]
            lines += [
                "vllm:spec_decode_num_accepted_tokens_per_pos_total"
                f'{{{labels},position="{pos}"}} {count}'
                for pos, count in enumerate(self.spec_accepted_per_pos)
            ]
        return web.Response(text="\n".join(lines) + "\n", content_type="text/plain")

    async def profile(self, request: web.Request) -> web.Response:
        """POST /start_profile and /stop_profile: accepted, as by a vLLM server that profiles."""
        return web.Response()

    async def stats(self, request: web.Request) -> web.Response:
        """GET /mock/stats: requests received so far by method and path, how many were being
        handled at once (now, and at most), the usage reported, and the connections' fate."""
        stats = {
            "personality": self.personality.name,
            "requests": self.requests_seen,
            "in_flight": self.in_flight,
            "max_in_flight": self.max_in_flight,
            "requests_served": self.served,
            "prompt_tokens": self.counts.prompt,
            "completion_tokens": self.counts.generated,
            "connections": self.connections.stats(),
        }
        return web.Response(body=orjson.dumps(stats), content_type=_JSON)

    async def timings(self, request: web.Request) -> web.Response:
        """GET /timings (with --record-timings): the timing records so far, as an .npz archive."""
        assert self.recorder is not None
        return web.Response(body=self.recorder.npz(), content_type="application/octet-stream")

    async def _generate(self, request: web.Request, chat: bool) -> web.StreamResponse:
        arrival_ns = perf_counter_ns()
        request_id = f"{self.personality.id_prefix(chat)}{self.id_base}{next(self.counter):016x}"
        record = None
        if self.recorder is not None:
            record = self.recorder.add(request.headers.get("x-request-id", request_id), arrival_ns)
        try:
            body = await self._json_body(request)
            self._check_model(body, required=True)
            max_tokens, min_tokens = self._length_limits(body, chat)
            prompt_tokens = await self._prompt_tokens(body, chat)
            ignore_eos = bool(body.get("ignore_eos"))
            n, finish_reason = self._output_len(max_tokens, min_tokens, ignore_eos, prompt_tokens)
        except _RequestError as exc:
            return self._reject(exc)
        if self.config.error_rate > 0 and self.rng.random() < self.config.error_rate:
            return self._error(500, "Injected error (mock server --error-rate).")

        stream_options = body.get("stream_options")
        include_usage = isinstance(stream_options, dict) and bool(
            stream_options.get("include_usage")
        )
        served = self.config.model
        model = self.personality.answered_model(chat, body.get("model"), served)
        answer = StreamRequest(
            chat=chat,
            request_id=request_id,
            created=int(time.time()),
            model=model,
            model_json=self.model_json if model == served else orjson.dumps(model),
            finish_reason=finish_reason,
            prompt_tokens=prompt_tokens,
            completion_tokens=n,
            include_usage=include_usage,
            ttft_ms=self.config.ttft_ms,
            itl_ms=self.config.itl_ms,
        )
        counts = self.counts
        counts.prompt += prompt_tokens
        counts.generated += n
        counts.requests += 1
        counts.running += 1
        try:
            if not body.get("stream"):
                await asyncio.sleep(self.ttft_s + (n - 1) * self.itl_s)
                response = self.personality.response(answer, self._text(n))
                return web.Response(body=orjson.dumps(response), content_type=_JSON)
            self._count_drafts(n)
            return await self._stream(request, self._events(answer, arrival_ns), record)
        finally:
            counts.running -= 1

    def _events(self, answer: StreamRequest, arrival_ns: int) -> _Events:
        shape = self.personality.stream_shape(answer)
        if answer.chat:
            fragments, offsets = self.chat_fragments, self.chat_offsets
        else:
            fragments, offsets = self.completion_fragments, self.completion_offsets
        if shape.suffix:
            events: _Events = _SuffixEvents(
                shape.head, shape.prefix, fragments, offsets, self.escaped, shape.last_suffix,
                shape.tail, answer.completion_tokens, shape.ttft_at, arrival_ns, 0,
                shape.last_prefix, shape.suffix,
            )  # fmt: skip
        else:
            events = _Events(
                shape.head, shape.prefix, fragments, offsets, self.escaped, shape.last_suffix,
                shape.tail, answer.completion_tokens, shape.ttft_at, arrival_ns, 0,
                shape.last_prefix,
            )  # fmt: skip
        return events

    async def _stream(
        self, request: web.Request, events: _Events, record: array | None
    ) -> web.StreamResponse:
        # A chat stream's role chunk is a choices-bearing event too; clients count it.
        head_events = 1 if events.head else 0
        close_after = self.personality.close_after_stream
        if self.itl_s <= 0:
            # The whole stream in one write, headers included, after the time to first token.
            if self.ttft_s > 0:
                await asyncio.sleep(self.ttft_s)
            body = events.render(0, events.n)
            if record is not None:  # aiohttp writes the body as soon as the handler returns
                record.extend(itertools.repeat(perf_counter_ns(), events.n + head_events))
            if not close_after:
                return web.Response(body=body, headers=_SSE_HEADERS)
            response = web.StreamResponse(headers=_SSE_HEADERS)
            response.content_length = len(body)
            try:
                await response.prepare(request)
                # Reading stops before the body goes out, so the next request is never read.
                self.connections.close_after_response(request.transport)
                await response.write(body)
                await response.write_eof()
            except ConnectionResetError:
                pass
            return response

        response = web.StreamResponse(headers=_SSE_HEADERS)
        # The whole stream is known up front, so it goes out with a Content-Length: no
        # chunked framing to build here or to parse in the client, per event.
        response.content_length = events.size()
        loop = asyncio.get_running_loop()
        if self.pacer is None or self.pacer.loop is not loop:
            self.pacer = _Pacer(loop, self.config.itl_ms)
        try:
            await response.prepare(request)
        except ConnectionResetError:
            return response  # the client went away before the headers
        transport = request.transport
        if transport is None or transport.is_closing():
            return response
        # The pacer writes the events straight to the transport: aiohttp's writer would only
        # count the bytes, and with the Content-Length set its write_eof() then adds nothing.
        # Nothing waits for the client to drain, but a stream is at most its known size.
        stream = _PacedStream(
            transport=transport,
            events=events,
            first_ms=self.pacer.now_ms() + self.config.ttft_ms,
            head_events=head_events,
            record=record,
            done=loop.create_future(),
            stop_reading=close_after,
        )
        self.pacer.start(stream)
        await stream.done
        await response.write_eof()
        if close_after:
            self.connections.close_after_response(transport)
        return response

    async def tokenize(self, request: web.Request) -> web.Response:
        """POST /tokenize: vLLM's form (prompt or messages), or llama.cpp's (content)."""
        if self.personality.tokenizer == "llamacpp":
            return await self._llamacpp_tokenize(request)
        if self.personality.tokenizer == "tgi":
            return await self._tgi_tokenize(request)
        try:
            body = await self._json_body(request)
            self._check_model(body, required=False)
            if "content" in body and "prompt" not in body and "messages" not in body:
                content = body["content"]
                if not isinstance(content, str):
                    raise _RequestError(400, "content must be a string")
                encoding = await self._encode(content, bool(body.get("add_special", False)))
                return web.Response(body=orjson.dumps({"tokens": encoding.ids}), content_type=_JSON)
            add_special_tokens = body.get("add_special_tokens", True)
            if "messages" in body:
                text = render_chat(body["messages"])
            elif isinstance(body.get("prompt"), str):
                text = body["prompt"]
            else:
                raise _RequestError(400, "tokenize needs a string prompt, messages, or content")
            encoding = await self._encode(text, bool(add_special_tokens))
        except _RequestError as exc:
            return self._reject(exc)
        if self.personality.tokenizer == "sglang":
            response: dict[str, Any] = {"tokens": encoding.ids, "count": len(encoding.ids)}
            response["max_model_len"] = self.config.max_model_len
        else:
            response = {
                "count": len(encoding.ids),
                "max_model_len": self.config.max_model_len,
                "tokens": encoding.ids,
                "token_strs": encoding.tokens if body.get("return_token_strs") else None,
            }
        return web.Response(body=orjson.dumps(response), content_type=_JSON)

    async def detokenize(self, request: web.Request) -> web.Response:
        """POST /detokenize: token ids to text, special tokens kept."""
        if self.personality.tokenizer == "llamacpp":
            return await self._llamacpp_detokenize(request)
        try:
            body = await self._json_body(request)
            self._check_model(body, required=False)
            tokens = body.get("tokens")
            if not isinstance(tokens, list):
                raise _RequestError(400, "tokens must be a list of token ids")
            if tokens:
                self._check_token_ids(tokens)
        except _RequestError as exc:
            return self._reject(exc)
        text = self.tokenizer.decode(tokens, skip_special_tokens=False)
        key = "text" if self.personality.tokenizer == "sglang" else "prompt"
        return web.Response(body=orjson.dumps({key: text}), content_type=_JSON)

    async def _tgi_tokenize(self, request: web.Request) -> web.Response:
        """TGI's POST /tokenize: the generate body ``{"inputs"}`` to a bare array of
        ``{"id", "text", "start", "stop"}`` (character offsets)."""
        try:
            body = await self._json_body(request)
            inputs = body.get("inputs")
            if not isinstance(inputs, str):
                raise _RequestError(400, "inputs must be a string")
        except _RequestError as exc:
            return self._reject(exc)
        encoding = await self._encode(inputs)
        tokens = [
            {"id": i, "text": inputs[start:stop], "start": start, "stop": stop}
            for i, (start, stop) in zip(encoding.ids, encoding.offsets, strict=True)
        ]
        return web.Response(body=orjson.dumps(tokens), content_type=_JSON)

    async def _llamacpp_tokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /tokenize: ``{"content", "add_special", "with_pieces"}`` to
        ``{"tokens"}``; a body without ``content`` (vLLM's form) gets no tokens."""
        try:
            body = await self._json_body(request)
            content = body.get("content")
            if content is not None and not isinstance(content, str):
                raise _RequestError(400, "content must be a string")
        except _RequestError as exc:
            return self._reject(exc)
        if content is None:
            return web.Response(body=b'{"tokens":[]}', content_type=_JSON)
        encoding = await self._encode(content, bool(body.get("add_special", False)))
        tokens: list[Any] = encoding.ids
        if body.get("with_pieces"):
            decode = self.tokenizer.decode
            tokens = [{"id": i, "piece": decode([i], skip_special_tokens=False)} for i in tokens]
        return web.Response(body=orjson.dumps({"tokens": tokens}), content_type=_JSON)

    async def _llamacpp_detokenize(self, request: web.Request) -> web.Response:
        """llama.cpp's POST /detokenize: ``{"tokens"}`` to ``{"content"}``; an id out of the
        vocabulary is a server error (500)."""
        try:
            body = await self._json_body(request)
            tokens = body.get("tokens", [])
            if not isinstance(tokens, list) or set(map(type, tokens)) - {int}:
                raise _RequestError(500, "tokens must be a list of token ids")
            if tokens and (min(tokens) < 0 or max(tokens) >= self.vocab_size):
                raise _RequestError(500, f"token id out of range [0, {self.vocab_size})")
        except _RequestError as exc:
            return self._reject(exc)
        text = self.tokenizer.decode(tokens, skip_special_tokens=False)
        return web.Response(body=orjson.dumps({"content": text}), content_type=_JSON)


def _answer(answer: Answer) -> web.Response:
    status, body, content_type = answer
    return web.Response(status=status, body=body, content_type=content_type)


SERVER_KEY = web.AppKey("server", _MockServer)


def build_app(config: MockConfig) -> web.Application:
    """The mock server's aiohttp application; loads the tokenizer and precomputes the output."""
    server = _MockServer(config)
    app = web.Application(client_max_size=MAX_BODY_BYTES, middlewares=[server.count_and_gate])
    app[SERVER_KEY] = server
    app.router.add_get("/health", server.health)
    app.router.add_get("/v1/models", server.models)
    if server.personality.metrics:
        app.router.add_get("/metrics", server.metrics)
    app.router.add_post("/v1/completions", server.completions)
    app.router.add_post("/v1/chat/completions", server.chat_completions)
    app.router.add_post("/v1/embeddings", server.embeddings)
    app.router.add_post("/pooling", server.pooling)
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        app.router.add_post(path, server.rerank)
    tokenizer = server.personality.tokenizer
    if tokenizer is not None:
        app.router.add_post("/tokenize", server.tokenize)
    if tokenizer not in (None, "tgi"):  # TGI has no /detokenize
        app.router.add_post("/detokenize", server.detokenize)
    if tokenizer == "sglang":
        app.router.add_post("/v1/tokenize", server.tokenize)
        app.router.add_post("/v1/detokenize", server.detokenize)
    app.router.add_get(STATS_PATH, server.stats)
    app.router.add_post("/start_profile", server.profile)
    app.router.add_post("/stop_profile", server.profile)
    if server.recorder is not None:
        app.router.add_get("/timings", server.timings)
        app[RECORDER_KEY] = server.recorder
    if server.extra_headers:
        app.on_response_prepare.append(functools.partial(_add_headers, server.extra_headers))
    return app


async def _add_headers(
    headers: dict[str, str], request: web.Request, response: web.StreamResponse
) -> None:
    """Add the personality's headers to a response about to be sent."""
    response.headers.update(headers)


async def serve(config: MockConfig, host: str, port: int) -> None:
    """Serve until SIGINT or SIGTERM; the port opens only once the startup delay has passed."""
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, stop.set)

    app = build_app(config)
    server = app[SERVER_KEY]
    if config.startup_delay_s > 0 and server.personality.port_closed_while_loading:
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(stop.wait(), config.startup_delay_s)
        if stop.is_set():
            _save_timings(app, config.record_timings)
            return

    runner = web.AppRunner(
        app,
        access_log=None,
        handle_signals=False,
        shutdown_timeout=1.0,
        keepalive_timeout=server.keepalive_timeout_s,
    )
    await runner.setup()
    assert runner.server is not None
    server.connections.install(runner.server)
    try:
        site = web.TCPSite(runner, host, port, backlog=LISTEN_BACKLOG, reuse_address=True)
        await site.start()
        server.mark_open()
        collector = asyncio.create_task(_collect_garbage_when_idle(server))
        real_port = runner.addresses[0][1]
        shown_host = f"[{host}]" if ":" in host else host
        print(f"loadgen mock-server listening on http://{shown_host}:{real_port}", flush=True)
        await stop.wait()
        collector.cancel()
    finally:
        await runner.cleanup()
    _save_timings(app, config.record_timings)


async def _collect_garbage_when_idle(server: _MockServer) -> None:
    """Keep Python's cyclic garbage collection out of the responses the mock is timed on.

    A collection walks the live objects of its generations: with thousands of open connections
    (loadgen pre-opens one per request of an uncapped run) the old generation's took 50-150 ms
    and the middle one's 7-15 ms here, stalling every response in flight. Serving a request
    leaves no cyclic garbage (those collections freed nothing), so automatic collection is off
    and a full one runs only after a whole tick without any request.
    """
    gc.freeze()  # the tokenizer and the precomputed output live as long as the server
    gc.disable()
    seen = -1
    while True:
        await asyncio.sleep(IDLE_GC_TICK_S)
        total = sum(server.requests_seen.values())
        if server.in_flight == 0 and total == seen:
            gc.collect()
        seen = total


def _save_timings(app: web.Application, path: Path | None) -> None:
    """Write the app's timing records to ``path``, if it records any."""
    recorder = app.get(RECORDER_KEY)
    if recorder is None or path is None:
        return
    try:
        recorder.save(path)
    except OSError as exc:
        raise click.ClickException(f"cannot write the timing records to {path}: {exc}") from None


@click.command(
    "mock-server",
    help="Run an OpenAI-compatible mock inference server (/v1/completions, "
    "/v1/chat/completions, /v1/embeddings, /pooling, /rerank, /v1/models, /tokenize, /detokenize, "
    "/health) with configurable "
    "latency, output length, error rate and start-up behaviour. GET /mock/stats counts the "
    "requests received, by method and path.\n\n"
    "Capacity on a 2-core machine: about 2800-3000 streamed requests/s (360k-380k events/s) with "
    "128-token streams; see docs/mock-server.md.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port",
    default=8000,
    show_default=True,
    type=click.IntRange(0, 65535),
    help="Port to listen on; 0 picks a free one.",
)
@click.option("--model", default=MOCK_MODEL_NAME, show_default=True, help="Served model name.")
@click.option(
    "--tokenizer",
    default=MOCK_MODEL_NAME,
    show_default=True,
    help="Tokenizer that counts tokens: a tokenizer.json, a directory, or a hub id.",
)
@click.option(
    "--ttft-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Time to first token.",
)
@click.option(
    "--itl-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Time between token events; 0 sends a whole stream in one write.",
)
@click.option(
    "--output-len",
    default=128,
    show_default=True,
    type=click.IntRange(min=1),
    help="Tokens a response has when the model stops by itself (no ignore_eos).",
)
@click.option(
    "--startup-delay",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds the model 'loads' after start: the port stays closed (vllm, sglang, tgi, "
    "openai) or answers every request 503 (llamacpp).",
)
@click.option(
    "--error-rate",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Fraction of generation requests answered with HTTP 500.",
)
@click.option(
    "--seed", default=0, show_default=True, type=int, help="Seed of the error-injection generator."
)
@click.option(
    "--max-model-len",
    default=131072,
    show_default=True,
    type=click.IntRange(min=1),
    help="Context length reported in /v1/models and enforced on requests.",
)
@click.option(
    "--record-timings",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Record when each generation request arrived and each token event was written "
    "(time.perf_counter_ns) and save them to this .npz file at shutdown; also serves "
    "GET /timings.",
)
@click.option(
    "--unavailable-for",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Seconds after the port opens during which every request gets HTTP 503, like a "
    "gateway whose backend is still loading.",
)
@click.option(
    "--personality",
    default="vllm",
    show_default=True,
    type=click.Choice(sorted(PERSONALITIES)),
    help="The server whose answers and connection habits to reproduce; see docs/servers.md.",
)
@click.option(
    "--keepalive-timeout",
    default=None,
    type=click.FloatRange(min=0, min_open=True),
    help="Seconds an idle keep-alive connection stays open. Default: the personality's "
    "(5 for vllm, sglang and llamacpp; none for tgi; 75 for openai).",
)
@click.option(
    "--http-threads",
    default=None,
    type=click.IntRange(min=0),
    help="Connection handlers, each held by an open connection, idle or not; connections "
    "beyond them wait until one closes (cpp-httplib's thread pool). 0: unbounded. Default: "
    "8 for llamacpp, unbounded for the others.",
)
@click.option(
    "--lora",
    "lora_names",
    multiple=True,
    metavar="NAME",
    help="A LoRA adapter name to serve besides the model (repeatable); requests may name it.",
)
@click.option(
    "--spec-decode-draft-tokens",
    default=0,
    show_default=True,
    type=click.IntRange(min=0),
    help="Report vLLM's spec-decode counters on /metrics: a draft of this many tokens per "
    "generated token, half of them accepted.",
)
@click.option(
    "--embedding-dim",
    default=384,
    show_default=True,
    type=click.IntRange(min=1),
    help="Floats per vector answered by /v1/embeddings and /pooling.",
)
@click.option(
    "--empty-model-list",
    is_flag=True,
    help="Serve /v1/models with no model in it, like a gateway without backends.",
)
def mock_server_command(
    host: str,
    port: int,
    model: str,
    tokenizer: str,
    ttft_ms: float,
    itl_ms: float,
    output_len: int,
    startup_delay: float,
    error_rate: float,
    seed: int,
    max_model_len: int,
    record_timings: Path | None,
    unavailable_for: float,
    personality: str,
    keepalive_timeout: float | None,
    http_threads: int | None,
    lora_names: tuple[str, ...],
    embedding_dim: int,
    spec_decode_draft_tokens: int,
    empty_model_list: bool,
) -> None:
    """Run the mock server until SIGINT or SIGTERM."""
    if record_timings is not None:
        folder = record_timings.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise click.BadParameter(
                f"{folder} is not a writable directory", param_hint="--record-timings"
            )
    # Options left at their default take the personality's; asked by source, not by value.
    context = click.get_current_context()
    if context.get_parameter_source("keepalive_timeout") is ParameterSource.DEFAULT:
        keepalive_timeout = None
    if context.get_parameter_source("http_threads") is ParameterSource.DEFAULT:
        http_threads = None
    config = MockConfig(
        model=model,
        tokenizer=tokenizer,
        ttft_ms=ttft_ms,
        itl_ms=itl_ms,
        output_len=output_len,
        startup_delay_s=startup_delay,
        error_rate=error_rate,
        seed=seed,
        max_model_len=max_model_len,
        record_timings=record_timings,
        unavailable_for_s=unavailable_for,
        empty_model_list=empty_model_list,
        personality=personality,
        keepalive_timeout_s=keepalive_timeout,
        http_threads=http_threads,
        lora_names=lora_names,
        embedding_dim=embedding_dim,
        spec_decode_draft_tokens=spec_decode_draft_tokens,
    )
    try:
        uvloop.run(serve(config, host, port))
    except TokenizerLoadError as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {host}:{port}: {exc}") from None


if __name__ == "__main__":
    mock_server_command()
