"""Incremental parser for one OpenAI-style Server-Sent-Events response, working on bytes.

It does the least the metrics need, per read rather than per event: cut the bytes after the
last complete event, count the events in them whose ``choices`` list is not empty (a C-level
``bytes.count`` for compact JSON, a regex otherwise) and stamp them all with the read's
instant. Only an event that carries ``usage`` or ``error`` is split out and JSON-parsed (about
once per response). Semantics follow ``vllm bench serve`` (reference §2.2-2.3):

- events are separated by a blank line (``\\n\\n``; ``\\r\\n`` is normalised);
- lines starting with ``:`` are comments (pings) and are skipped;
- ``data: [DONE]`` ends the stream;
- an event counts as a token event when its ``choices`` list is not empty (text may be empty);
- a trailing ``data:`` payload with no separator yet is released at once when it is already
  complete JSON (or ``[DONE]``), so a TCP segment that ends right before ``\\n\\n`` is not
  stamped late;
- usage comes from a choices-less chunk (``"choices": []``); usage riding on a chunk that also
  has choices is ignored, as upstream's Python client does.

A ``"choices"`` inside generated text cannot be mistaken for the key: JSON escapes the quotes.
"""

from __future__ import annotations

import re
from array import array

import orjson

_NONEMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*[^\s\]]')


def count_token_events(part: bytes) -> int:
    """How many events in ``part`` (whole events) have a ``"choices"`` list that is not empty."""
    compact = part.count(b'"choices":[{')
    if compact:
        return compact  # compact JSON, as vLLM, SGLang and most servers send it: one scan
    if b'"choices"' not in part:
        return 0
    return len(_NONEMPTY_CHOICES.findall(part))


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


class SSEStream:
    """State of one streamed response: token event instants, usage, and the end marker."""

    __slots__ = ("_buffer", "completion_tokens", "done", "error", "event_ns", "prompt_tokens")

    def __init__(self) -> None:
        self._buffer = b""
        self.event_ns: array = array("q")  # arrival instants of choices-bearing events
        self.prompt_tokens = -1
        self.completion_tokens = -1
        self.done = False
        self.error: str | None = None  # an error object the server sent inside the stream

    def feed(self, data: bytes, now_ns: int) -> None:
        """Consume bytes that arrived at ``now_ns``; every event they complete is stamped so."""
        buffer = self._buffer + data if self._buffer else data
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
        if self._buffer.strip():
            self._complete(self._buffer, now_ns)
        self._buffer = b""

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

        Usage is looked for only as the last usage of the part and [DONE] only in its tail, so
        a part costs two scans (token events, errors) however many events it holds.
        """
        n = count_token_events(part)
        if n:
            self.event_ns.extend([now_ns] * n)
        if _ends_stream(part[-16:]):
            self.done = True
        at = part.rfind(b'"usage"')
        if at >= 0 and not part.startswith(b'"usage":null', at):
            self._side_channel_at(part, at)
        at = part.find(b'"error"')
        if at >= 0:
            self._side_channel_at(part, at)

    def _side_channel_at(self, part: bytes, at: int) -> None:
        """JSON-parse the event of ``part`` around offset ``at`` when it has no choices."""
        start = part.rfind(b"\n\n", 0, at) + 1  # 0 when the event opens the part
        end = part.find(b"\n\n", at)
        payload = data_of(part[start : len(part) if end < 0 else end].strip())
        if payload and not choices_nonempty(payload):
            self._parse_side_channel(payload)

    def _parse_side_channel(self, payload: bytes) -> None:
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return
        if not isinstance(obj, dict):
            return
        usage = obj.get("usage")
        if isinstance(usage, dict):
            completion = usage.get("completion_tokens")
            prompt = usage.get("prompt_tokens")
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


def generated_text(chunks: list[bytes], chat: bool) -> str:
    """Concatenate the generated text of a finished stream (run after the stream is closed)."""
    pieces: list[str] = []
    for block in b"".join(chunks).replace(b"\r\n", b"\n").split(b"\n\n"):
        payload = data_of(block.strip())
        if not payload or not choices_nonempty(payload):
            continue
        try:
            choice = orjson.loads(payload)["choices"][0]
        except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
            continue
        piece = (choice.get("delta") or {}).get("content") if chat else choice.get("text")
        if isinstance(piece, str):
            pieces.append(piece)
    return "".join(pieces)
