"""Incremental parser for one OpenAI-style Server-Sent-Events response, working on bytes.

It does the least the metrics need, per read rather than per event: cut the bytes after the
last complete event, count the token events in them (C-level ``bytes.count`` scans in the
common case) and stamp them all with the read's instant. Only an event that carries ``usage``,
``metrics`` or ``error`` is split out and JSON-parsed (about once per response). Semantics
follow ``vllm bench serve`` 0.33 (reference §2.2-2.3, checked against upstream's
``endpoint_request_func.py``):

- events are separated by a blank line (``\\n\\n``; ``\\r\\n`` is normalised);
- lines starting with ``:`` are comments (pings) and are skipped;
- ``data: [DONE]`` ends the stream;
- **completions**: an event is a token event when its ``choices`` list is not empty (text may
  be empty);
- **chat**: an event is a token event when its first choice has streamed output, as upstream's
  ``_choice_has_streamed_output``: its ``delta`` has a non-empty ``content``, ``reasoning``,
  ``tool_calls`` or ``function_call``, or ``content == ""`` without a ``role`` key. The opening
  role chunk and an empty ``"delta":{}`` finish chunk are not tokens. A delta whose
  ``content`` is a non-empty string is recognised by a byte scan; only the rest (role, finish,
  tool-call and reasoning chunks, or a server whose key order the scan does not know) is
  JSON-parsed, one event at a time;
- a trailing ``data:`` payload with no separator yet is released at once when it is already
  complete JSON (or ``[DONE]``), so a TCP segment that ends right before ``\\n\\n`` is not
  stamped late;
- usage comes from an event that is not a token event (for completions, a ``"choices": []``
  chunk), as upstream's ``elif``. Usage riding on a token event is used only when the stream
  brings no such event: llama.cpp's and TGI's completions put it on their last token chunk
  and send no other (upstream's Python client then re-tokenises the text; its Rust client
  reads this usage);
- a ``metrics`` object (vLLM's ``queue_time_ms`` and ``time_to_first_token_ms``) is read from
  any event, the last one winning, as upstream's ``_update_server_metrics``;
- an answer that is not SSE at all (a ``stream: false`` body, one JSON object) is read whole
  at its end: one token event when it has a choice with output, and its usage. Upstream parses
  it as one message, which fails every chat answer; loadgen counts it (docs/compat.md).

A ``"choices"``, ``"delta"`` or ``"metrics"`` inside generated text cannot be mistaken for a
key: JSON escapes the quotes.
"""

from __future__ import annotations

import math
import re
from array import array
from typing import Any

import orjson

_NONEMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*[^\s\]]')
# A delta whose top-level "content" is a non-empty string (whatever keys come before it).
_DELTA_WITH_CONTENT = re.compile(rb'"delta"\s*:\s*\{[^{}]*?"content"\s*:\s*"[^"]')


def count_token_events(part: bytes) -> int:
    """How many events in ``part`` (whole events) have a ``"choices"`` list that is not empty."""
    compact = part.count(b'"choices":[{')
    if compact:
        return compact  # compact JSON, as vLLM, SGLang and most servers send it: one scan
    if b'"choices"' not in part:
        return 0
    return len(_NONEMPTY_CHOICES.findall(part))


# A flat delta with a role and nothing that is output: the opening chunk of vLLM, llama.cpp,
# SGLang and OpenAI ({"role":"assistant","content":""}, "content":null, null-valued keys).
_SILENT_ROLE = re.compile(
    rb'"delta":\{(?:"\w+":(?:null|""|\[\]),)*"role":"\w+"(?:,"\w+":(?:null|""|\[\]))*\}'
)
# An empty delta, or one whose every value is null: a finish chunk.
_SILENT_NULLS = re.compile(rb'"delta":\{(?:"\w+":null(?:,"\w+":null)*)?\}')


def _count_chat(part: bytes, n: int) -> int:
    """Token events among the ``n`` choices-bearing chat events of ``part``, from byte counts
    alone, or -1 when some event is neither a content delta nor a known silent one."""
    if part.count(b'"delta":') != n:
        return -1  # not one compact delta per event: decide event by event
    content = part.count(b'"delta":{"content":"') - part.count(b'"delta":{"content":""')
    if content == n:
        return n  # vLLM's and llama.cpp's token chunks, content first: C-level counts
    if content == 0:  # another key order (SGLang writes role first): one regex scan
        content = len(_DELTA_WITH_CONTENT.findall(part))
        if content == n:
            return n
    silent = (
        part.count(b'"delta":{}')
        + part.count(b'"delta":{"role":"assistant","content":""}')
        + part.count(b'"delta":{"role":"assistant","content":null}')
    )
    if content + silent == n:
        return content  # with vLLM's or llama.cpp's role and finish chunks
    content = len(_DELTA_WITH_CONTENT.findall(part))
    silent = len(_SILENT_ROLE.findall(part)) + len(_SILENT_NULLS.findall(part))
    return content if content + silent == n else -1


def has_streamed_output(choice: Any) -> bool:
    """Upstream's ``_choice_has_streamed_output`` for one chat choice (a parsed dict)."""
    delta = choice.get("delta") if isinstance(choice, dict) else None
    if not isinstance(delta, dict):
        return False
    if (
        delta.get("content")
        or delta.get("reasoning")
        or delta.get("tool_calls")
        or delta.get("function_call")
    ):
        return True
    # A token that decodes to nothing carries content "" and no role; the opening chunk a role.
    return delta.get("content") == "" and "role" not in delta


def is_token_event(payload: bytes, chat: bool) -> bool:
    """Whether one event's data ``payload`` is a token event for the backend (see above)."""
    if not count_token_events(payload):
        return False
    if not chat:
        return True
    if payload.count(b'"delta"') == 1 and _DELTA_WITH_CONTENT.search(payload):
        return True
    try:
        choices = orjson.loads(payload).get("choices")
    except (orjson.JSONDecodeError, AttributeError):
        return False
    return bool(choices) and isinstance(choices, list) and has_streamed_output(choices[0])


def _ends_stream(tail: bytes) -> bool:
    """Whether the tail of the received events is a ``data: [DONE]`` event."""
    return tail.rstrip().endswith(b"[DONE]") and (
        tail.lstrip().startswith((b"data: [DONE]", b"data:[DONE]"))
        or b"\ndata: [DONE]" in tail
        or b"\ndata:[DONE]" in tail
    )


def choices_nonempty(payload: bytes) -> bool:
    """True when the JSON object ``payload`` has a ``"choices"`` array that is not empty."""
    return count_token_events(payload) > 0


def data_of(block: bytes) -> bytes | None:
    """The data field of one event block, or None when it has none (comments, bare fields)."""
    if block.startswith(b"data:") and b"\n" not in block:
        return block[5:].strip()
    lines = [line[5:].strip() for line in block.split(b"\n") if line.startswith(b"data:")]
    return b"\n".join(lines) if lines else None


def _seconds(value: Any) -> float:
    """A server metric in ms as seconds, NaN when absent or not a number (upstream's None)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return value / 1000.0
    return math.nan


class SSEStream:
    """State of one streamed response: token event instants, usage, server metrics, the end."""

    __slots__ = (
        "_buffer",
        "_rider",
        "_whole",
        "chat",
        "completion_tokens",
        "done",
        "error",
        "event_ns",
        "prompt_tokens",
        "server_queue_s",
        "server_ttft_s",
    )

    def __init__(self, chat: bool = False) -> None:
        self.chat = chat
        self._buffer = b""
        self._whole: bool | None = None  # a non-SSE JSON answer; known from the first byte
        self._rider: tuple[int, int] | None = None  # (prompt, completion) usage on a token event
        self.event_ns: array = array("q")  # arrival instants of token events
        self.prompt_tokens = -1
        self.completion_tokens = -1
        self.server_queue_s = math.nan  # the server's metrics object, when it sends one
        self.server_ttft_s = math.nan
        self.done = False
        self.error: str | None = None  # an error object the server sent inside the stream

    def feed(self, data: bytes, now_ns: int) -> None:
        """Consume bytes that arrived at ``now_ns``; every event they complete is stamped so."""
        buffer = self._buffer + data if self._buffer else data
        if self._whole is None:
            start = buffer.lstrip()[:1]
            if not start:
                self._buffer = buffer
                return
            self._whole = start in (b"{", b"[")
        if self._whole:
            self._buffer = buffer  # one JSON document: read at finish()
            return
        if b"\r" in buffer:
            buffer = buffer.replace(b"\r\n", b"\n")
        cut = buffer.rfind(b"\n\n")
        if cut >= 0:
            self._complete(buffer[:cut], now_ns)
            buffer = buffer[cut + 2 :]
        # A read may end between the two newlines of a separator; the leftover newline would
        # hide a complete trailing payload from the speculative release below.
        self._buffer = buffer.lstrip()
        if self._buffer.startswith(b"data:"):
            self._speculate(now_ns)

    def finish(self, now_ns: int) -> None:
        """End of body: whatever is left in the buffer is the last event."""
        if self._whole:
            self._read_whole(self._buffer, now_ns)
        elif self._buffer.strip():
            self._complete(self._buffer, now_ns)
        self._buffer = b""
        if self._rider is not None and self.completion_tokens < 0 and self.prompt_tokens < 0:
            self.prompt_tokens, self.completion_tokens = self._rider

    def _speculate(self, now_ns: int) -> None:
        payload = self._buffer[5:].strip()
        if payload != b"[DONE]":
            try:
                orjson.loads(payload)
            except orjson.JSONDecodeError:
                return  # incomplete; wait for more bytes
        self._complete(self._buffer, now_ns)
        self._buffer = b""

    def _complete(self, part: bytes, now_ns: int) -> None:
        """Account for whole events that arrived at ``now_ns``.

        Usage and metrics are looked for only as the last of the part and [DONE] only in its
        tail, so a part costs a few C-level scans however many events it holds.
        """
        n = self._count(part)
        if n:
            self.event_ns.extend([now_ns] * n)
        if _ends_stream(part[-16:]):
            self.done = True
        at = part.rfind(b'"usage"')
        if at >= 0 and not part.startswith(b'"usage":null', at):
            self._side_channel_at(part, at, usage=True)
        at = part.rfind(b'"metrics"')
        if at >= 0:
            self._side_channel_at(part, at, usage=False)
        at = part.find(b'"error"')
        if at >= 0:
            self._side_channel_at(part, at, usage=True)

    def _count(self, part: bytes) -> int:
        """Token events among the whole events of ``part``."""
        n = count_token_events(part)
        if not n or not self.chat:
            return n
        count = _count_chat(part, n)
        if count >= 0:
            return count
        count = 0
        for block in part.split(b"\n\n"):
            payload = data_of(block.strip())
            if payload and is_token_event(payload, chat=True):
                count += 1
        return count

    def _side_channel_at(self, part: bytes, at: int, usage: bool) -> None:
        """JSON-parse the event of ``part`` around offset ``at``: for usage and errors only
        when it is not a token event, for the metrics object always."""
        start = part.rfind(b"\n\n", 0, at) + 1  # 0 when the event opens the part
        end = part.find(b"\n\n", at)
        payload = data_of(part[start : len(part) if end < 0 else end].strip())
        if not payload:
            return
        rider = usage and is_token_event(payload, self.chat)
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(obj, dict):
            return
        if rider:  # kept aside: used only if no usage-only event comes (see finish)
            counts = obj.get("usage")
            if isinstance(counts, dict):
                prompt, completion = counts.get("prompt_tokens"), counts.get("completion_tokens")
                self._rider = (
                    prompt if isinstance(prompt, int) else -1,
                    completion if isinstance(completion, int) else -1,
                )
            return
        self._take(obj, usage)

    def _take(self, obj: dict[str, Any], usage: bool) -> None:
        """Read usage and errors (``usage``) or the metrics object from one parsed event."""
        if not usage:
            metrics = obj.get("metrics")
            if isinstance(metrics, dict):
                self.server_queue_s = _seconds(metrics.get("queue_time_ms"))
                self.server_ttft_s = _seconds(metrics.get("time_to_first_token_ms"))
            return
        counts = obj.get("usage")
        if isinstance(counts, dict):
            completion = counts.get("completion_tokens")
            prompt = counts.get("prompt_tokens")
            if isinstance(completion, int):
                self.completion_tokens = completion
            if isinstance(prompt, int):
                self.prompt_tokens = prompt
        error = obj.get("error") if "error" in obj else None
        if error is None and obj.get("object") == "error":
            error = obj
        if error is not None:
            message = error.get("message", error) if isinstance(error, dict) else error
            self.error = str(message)

    def _read_whole(self, body: bytes, now_ns: int) -> None:
        """A non-streamed answer: one token event at its end when it has output, its usage."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.error = "the answer is neither SSE nor JSON"
            return
        if not isinstance(obj, dict):
            return
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and _has_output(choices[0], self.chat):
            self.event_ns.append(now_ns)
        self._take(obj, usage=True)
        self._take(obj, usage=False)


def _has_output(choice: Any, chat: bool) -> bool:
    """Whether the first choice of a non-streamed answer holds generated output."""
    if not chat:
        return isinstance(choice, dict)
    message = choice.get("message") if isinstance(choice, dict) else None
    return isinstance(message, dict) and has_streamed_output({"delta": message})


def generated_text(chunks: list[bytes], chat: bool) -> str:
    """Concatenate the generated text of a finished stream (run after the stream is closed)."""
    body = b"".join(chunks)
    if body.lstrip()[:1] == b"{":
        return _whole_text(body, chat)
    pieces: list[str] = []
    for block in body.replace(b"\r\n", b"\n").split(b"\n\n"):
        payload = data_of(block.strip())
        if not payload or not is_token_event(payload, chat):
            continue
        try:
            choice = orjson.loads(payload)["choices"][0]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            continue
        piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
        if isinstance(piece, str):
            pieces.append(piece)
    return "".join(pieces)


def _whole_text(body: bytes, chat: bool) -> str:
    """The generated text of a non-streamed answer."""
    try:
        choice = orjson.loads(body)["choices"][0]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return ""
    piece = (choice.get("message") or {}).get("content") if chat else choice.get("text")
    return piece if isinstance(piece, str) else ""
