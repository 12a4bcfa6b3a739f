"""Incremental parser for one OpenAI-style Server-Sent-Events response, working on bytes.

It does the least per event that the metrics need: find event boundaries, strip the ``data:``
field, and decide whether the payload's ``choices`` list is non-empty by scanning bytes. Only
a payload without choices that mentions ``usage`` or ``error`` is JSON-parsed (about once per
response). Semantics follow ``vllm bench serve`` (reference §2.2-2.3):

- events are separated by a blank line (``\\n\\n``; ``\\r\\n`` is normalised);
- lines starting with ``:`` are comments (pings) and are skipped;
- ``data: [DONE]`` ends the stream;
- an event counts as a token event when its ``choices`` list is not empty (text may be empty);
- a trailing ``data:`` payload with no separator yet is released at once when it is already
  complete JSON (or ``[DONE]``), so a TCP segment that ends right before ``\\n\\n`` is not
  stamped late;
- usage comes from a choices-less chunk (``"choices": []``); usage riding on a chunk that also
  has choices is ignored, as upstream's Python client does.
"""

from __future__ import annotations

from array import array

import orjson

_WHITESPACE = b" \t\r\n"


def choices_nonempty(payload: bytes) -> bool:
    """True when the JSON object ``payload`` has a ``"choices"`` array that is not empty."""
    at = payload.find(b'"choices"')
    if at < 0:
        return False
    i = at + 9
    n = len(payload)
    while i < n and payload[i] in b" \t\r\n:":
        i += 1
    if i >= n or payload[i] != 0x5B:  # "[" ; e.g. "choices": null
        return False
    i += 1
    while i < n and payload[i] in _WHITESPACE:
        i += 1
    return i < n and payload[i] != 0x5D  # "]"


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
        blocks = buffer.split(b"\n\n")
        # A read may end between the two newlines of a separator; the leftover newline would
        # hide a complete trailing payload from the speculative release below.
        self._buffer = blocks.pop().lstrip()
        for block in blocks:
            self._event(block, now_ns)
        if self._buffer.startswith(b"data:"):
            self._speculate(now_ns)

    def finish(self, now_ns: int) -> None:
        """End of body: whatever is left in the buffer is the last event."""
        if self._buffer.strip():
            self._event(self._buffer, now_ns)
        self._buffer = b""

    def _speculate(self, now_ns: int) -> None:
        payload = self._buffer[5:].strip()
        if payload == b"[DONE]":
            self.done = True
        else:
            try:
                orjson.loads(payload)
            except orjson.JSONDecodeError:
                return  # incomplete; wait for more bytes
            self._payload(payload, now_ns)
        self._buffer = b""

    def _event(self, block: bytes, now_ns: int) -> None:
        payload = data_of(block.strip())
        if payload:
            self._payload(payload, now_ns)

    def _payload(self, payload: bytes, now_ns: int) -> None:
        if choices_nonempty(payload):
            self.event_ns.append(now_ns)
        elif payload == b"[DONE]":
            self.done = True
        elif b'"usage"' in payload or b'"error"' in payload:
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
