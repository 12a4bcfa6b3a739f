"""Incremental parser for one OpenAI-style Server-Sent-Events response, working on bytes.

It does the least the metrics need, per read rather than per event: cut the bytes after the
last complete event, count the token events in them (SIMD substring counts, StringZilla's
``sz.count``, in the common case) and stamp them all with the read's instant. Only an event
that carries ``usage`` or ``metrics`` is split out and JSON-parsed (about once per response);
an error event is found when the body is checked at its end. Semantics follow
``vllm bench serve`` 0.33 (reference §2.2-2.3, checked against upstream's
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
  chunk), as upstream's ``elif``. Usage riding on a token event is not read: llama.cpp's and
  TGI's completions put it on their last token chunk and send no other, and upstream's Python
  client then keeps the dataset's prompt length and re-tokenises the text for the output
  count, and so does loadgen (the worker sends the text back: workers/stream_text.py);
- a ``metrics`` object (vLLM's ``queue_time_ms`` and ``time_to_first_token_ms``) is read, the
  last one winning, as upstream's ``_update_server_metrics``, from the events where a server
  puts it: vLLM sends it on the final usage chunk. It is read from every event read whole
  (usage, or no choices) and from the last event of each read; upstream also reads one from a
  token event in the middle of a read, which no server sends;
- an answer that is not SSE at all (a ``stream: false`` body, one JSON object) is read whole
  at its end: one token event when it has a choice with output, and its usage. Upstream parses
  it as one message, which fails every chat answer; loadgen counts it (docs/compat.md).

What fails a 200 answer (``SSEStream.failure``; docs/compat.md, "Honest failures"):

- **an error event**, ``data: {"error": ...}`` (vLLM, SGLang, TGI, llama.cpp today),
  ``{"object": "error", ...}``, or llama.cpp's older ``error: {...}`` field, before or after
  tokens: failed with the server's message. Deliberately not upstream's chat and completions
  backends, which skip an event without choices or usage and count the request a success when
  a token came before (``async_request_openai_chat_completions``); upstream's own Responses
  backend fails it (``data.get("error")`` in ``async_request_openai_responses``), as does
  openai-python;
- **a body that is not SSE** (its first line is no SSE field: an HTML page, a plain-text
  error) or **a data event that is not a JSON object** (``data: hello``): no token event is
  counted and the reason says which. Upstream's ``json.loads`` raises on such an event and
  fails the request with a traceback; a body without a complete message fails as "Never
  received a valid chunk" there;
- **a data event that only looks like a JSON object**: the events counted by their bytes (those
  with ``"choices":[{``) are trusted to be JSON objects only while every data line of the body
  is object-shaped (its payload starts with ``{`` and ends with ``}``: as many ``data: {`` as
  ``}`` before a separator, as many as the events that should be objects); when the counts
  disagree, every event is parsed and the first one that is not a JSON object fails the
  request, ``choices`` or not. (Only the shape is checked on that path: an event that opens
  with ``{`` and closes with ``}`` but is not JSON inside, ``{"choices":[{}]}}``, is counted;
  parsing every event to find it would cost more than the rest of the parser);
- **an event over ``MAX_EVENT_BYTES``** (16 MiB, held unfinished) raises ``EventTooLarge``
  from ``feed``, which fails the request: a single line without end cannot grow a worker's
  memory without bound;
- **a body that ends without ``data: [DONE]``** is not a failure: upstream never looks for
  ``[DONE]`` and counts the token events that came (a success if one did), and so does
  loadgen; an event cut short by the end is dropped, as upstream's ``StreamedResponseHandler``
  drops it. ``SSEStream.truncated`` says so, the worker records it and the report counts
  such streams (``loadgen.truncated_streams``) and warns.

These are checked once per response, at ``finish``: a newline count that the events counted
while streaming must explain (token events, the events read whole for usage or metrics,
``[DONE]``). An error event is none of these, so a body that holds one is not explained and
gets the slower look, which parses its events and finds the error. (Hence an ``error`` key on
a token event, which no server sends, is not looked for: a per-read scan for ``"error"``
cost more than a third of the parser's time on a 128-token stream.)

Cost is linear in the body however it is split into reads: only new bytes are searched for
a separator, an unfinished event is kept in pieces joined once, and a large one (over
``SPECULATE_PARSE_MAX``) is JSON-parsed for speculative release only when its braces balance,
and after a balance that was not its end only once it has doubled
(``scripts/bench/sse_parser.py`` shows a 20 MB event in 4 KiB reads).

A ``"choices"``, ``"delta"`` or ``"metrics"`` inside generated text cannot be mistaken for a
key: JSON escapes the quotes.

Over 500 lines because it is one state machine over bytes: the streaming path (``feed``,
``_complete``), the end-of-body check (``finish``, ``_check``) and the chat rule read the same
counters of what was seen; split, each read would pay a call across modules, and the
check could drift from the counting it verifies.
"""

from __future__ import annotations

import math
import re
from array import array
from typing import Any

import orjson
import stringzilla as sz

_NONEMPTY_CHOICES = re.compile(rb'"choices"\s*:\s*\[\s*[^\s\]]')
# A delta whose top-level "content" is a non-empty string (whatever keys come before it).
_DELTA_WITH_CONTENT = re.compile(rb'"delta"\s*:\s*\{[^{}]*?"content"\s*:\s*"[^"]')


_COMPACT_CHOICES = b'"choices":[{'  # compact JSON, as vLLM, SGLang and most servers write it
_SPACED_CHOICES = b'"choices": [{'  # with Python's json.dumps separators (", ", ": ")


def count_token_events(part: bytes) -> int:
    """How many events in ``part`` (whole events) have a ``"choices"`` list that is not empty."""
    return sz.count(part, _COMPACT_CHOICES) or _count_other_choices(part)


def _count_other_choices(part: bytes) -> int:
    """``count_token_events`` for a part without compact choices: JSON with spaces."""
    spaced = sz.count(part, _SPACED_CHOICES)
    if spaced:
        return spaced
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
    if sz.count(part, b'"delta":') != n:
        return -1  # not one compact delta per event: decide event by event
    # A delta that opens with its content is a token event, empty content included (upstream:
    # a token that decodes to nothing), unless more keys follow an empty one (a role?).
    content = sz.count(part, b'"delta":{"content":"')
    if content and sz.contains(part, b'"delta":{"content":"",'):
        content = 0
    if content == n:
        return n  # vLLM's and llama.cpp's token chunks, content first: SIMD counts
    if content == 0:  # another key order (SGLang writes role first): one regex scan
        content = len(_DELTA_WITH_CONTENT.findall(part))
        if content == n:
            return n
    elif content + _silent_at_edges(part) == n:
        # vLLM's and llama.cpp's role chunk opens a stream and their finish chunk ends it: the
        # silent deltas are looked for in the part's first and last bytes before all of it.
        return content
    if content + _silent(part) == n:
        return content  # with vLLM's or llama.cpp's role and finish chunks
    content = len(_DELTA_WITH_CONTENT.findall(part))
    silent = len(_SILENT_ROLE.findall(part)) + len(_SILENT_NULLS.findall(part))
    return content if content + silent == n else -1


_EDGE = 1024  # bytes at each end of a part where a stream's role and finish chunks sit


def _silent(part: bytes) -> int:
    """Deltas in ``part`` that carry no output as vLLM, llama.cpp and OpenAI write them: the
    role chunk (content "" or null) and the empty finish delta."""
    return (
        sz.count(part, b'"delta":{}')
        + sz.count(part, b'"delta":{"role":"assistant","content":""}')
        + sz.count(part, b'"delta":{"role":"assistant","content":null}')
    )


def _silent_at_edges(part: bytes) -> int:
    """``_silent`` of the first and last ``_EDGE`` bytes of ``part`` (a lower bound of it)."""
    if len(part) <= 2 * _EDGE:
        return _silent(part)
    return _silent(part[:_EDGE]) + _silent(part[-_EDGE:])


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


# A held event up to this size is JSON-parsed on every read that may end it (speculative
# release). Beyond it, only when the tail is "}" and its braces balance (then not again before
# it has doubled): a 20 MB event arriving in 4 KiB reads is parsed about once, not 5,000 times
# (scripts/bench/sse_parser.py).
SPECULATE_PARSE_MAX = 64 * 1024
# The largest event the parser holds: a longer one (one line of 100 MB, no separator) fails the
# request with EventTooLarge rather than grow the worker's memory. No server's event comes near
# it: a token chunk is a few hundred bytes, a usage chunk with logprobs a few hundred KiB.
MAX_EVENT_BYTES = 16 * 2**20
# The first line of an SSE body: a comment, or a field (older llama.cpp builds wrote their stream
# errors as an "error:" field).
_SSE_START = re.compile(rb"(?:\xef\xbb\xbf)?(?::|(?:data|event|id|retry|error)(?::|\r?\n|$))")
_USAGE, _METRICS = 1, 2  # why an event is read whole (``_complete``)
NEVER_RECEIVED = (  # upstream's words for a 200 answer without a token event
    "Never received a valid chunk to calculate TTFT.This response will be marked as failed!"
)


class EventTooLarge(ValueError):
    """An event (or a non-SSE answer) longer than the stream's ``max_event_bytes``: ``feed``
    raises it, and the request fails with its message. The only error ``feed`` raises."""


class SSEStream:
    """State of one streamed response: token event instants, usage, server metrics, the end,
    and, once ``finish`` has run, whether it failed (``failure``) or ended without ``[DONE]``
    (``truncated``)."""

    __slots__ = (
        "_choices",
        "_cr",
        "_cut_tail",
        "_depth",
        "_finished",
        "_lfs",
        "_pending",
        "_pending_len",
        "_retry_at",
        "_side_ok",
        "_sse",
        "_unsure",
        "_whole",
        "cached_tokens",
        "chat",
        "chunks",
        "completion_tokens",
        "done",
        "ends",
        "error",
        "event_ns",
        "invalid",
        "max_event_bytes",
        "prompt_tokens",
        "server_queue_s",
        "server_ttft_s",
    )

    def __init__(self, chat: bool = False, max_event_bytes: int = MAX_EVENT_BYTES) -> None:
        self.chat = chat
        self.max_event_bytes = max_event_bytes  # a longer event raises EventTooLarge (feed)
        self.chunks: list[bytes] = []  # every read as it came: checked and its text read at the end
        self._pending: list[bytes] = []  # an event not complete yet (CRLF made LF), in pieces
        self._pending_len = 0
        self._depth: int | None = None  # "{" minus "}" of a held event past SPECULATE_PARSE_MAX
        self._retry_at = 0  # the held size before which such an event is not parsed again
        self._cr = False  # the last read ended in "\r", held back for the next one
        self._whole: bool | None = None  # a non-SSE JSON answer; known from the first byte
        self._sse = False  # known to be SSE (the first byte that is not whitespace)
        self._unsure = 0  # bytes before the body was known SSE (a JSON answer: all of them)
        self._choices = 0  # events with a non-empty choices list: JSON objects by their bytes
        self._side_ok = 0  # other data events read whole and found JSON objects (usage, errors)
        self._cut_tail = False  # the body ended inside an event, which is not counted
        self._finished = False
        self._lfs = 0  # LF bytes in the body so far, counted as each read comes (hot in cache)
        self.event_ns: array[int] = array("q")  # arrival instants of token events
        self.ends = 0  # reads that ended at least one SSE message (pings and empty events too)
        self.prompt_tokens = -1
        self.completion_tokens = -1
        self.cached_tokens = -1  # prompt tokens the server found in its prefix cache, or -1
        self.server_queue_s = math.nan  # the server's metrics object, when it sends one
        self.server_ttft_s = math.nan
        self.done = False  # a data: [DONE] event came
        self.error: str | None = None  # the message of an error the server sent with its 200
        self.invalid: str | None = None  # why the body is not SSE of JSON events (at finish)

    @property
    def failure(self) -> str | None:
        """Why this 200 answer failed (an error the server sent, a body that is not SSE or whose
        events are not JSON), or None. Known once ``finish`` has run."""
        if self.invalid is not None:
            return self.invalid
        if self.error is not None:
            where = "the answer" if self._whole else "the stream"
            return f"error in {where}: {self.error}"
        return None

    @property
    def choice_events(self) -> int:
        """Data events with a non-empty ``choices`` list seen so far."""
        return self._choices

    @property
    def truncated(self) -> bool:
        """The body ended (cleanly: the worker saw its end) without a ``data: [DONE]`` event and
        without a failure. Upstream never looks for ``[DONE]``: it counts such a stream by its
        token events, a success when one came, and so does loadgen; it is counted apart
        (``loadgen.truncated_streams``)."""
        return self._whole is not True and not self.done and self.failure is None

    def feed(self, data: bytes, now_ns: int) -> None:
        """Consume bytes that arrived at ``now_ns``; every event they complete is stamped so.

        Only the new bytes are searched for a separator (and the two newlines across the seam
        with held bytes), so each byte is scanned a bounded number of times however many reads
        an event spans.
        """
        self.chunks.append(data)
        if self._sse:
            # Counted for the check at the end while the read is fresh: counted at the end,
            # with many streams open, its bytes had left the CPU's caches and the count cost a
            # second trip to memory (17 µs per 28 KB body in a worker at the ceiling, not 4).
            self._lfs += sz.count(data, b"\n")
        else:
            self._unsure += len(data)
            begun = b"" if self._whole else self._begin()
            if not begun:  # a JSON document (read at finish), or only whitespace so far
                if self._unsure > self.max_event_bytes:
                    self._too_large("a body that is not SSE")
                return
            data = begun
            self._lfs = sz.count(data, b"\n")  # every read so far
        if len(data) > self.max_event_bytes:
            self._check_sizes(data)  # one read holding a whole event over the bound?
        if self._cr or b"\r" in data:
            data = self._lf(data)
            if not data:
                return
        cut = data.rfind(b"\n\n")
        if cut >= 0:
            self.ends += 1  # reads that end an SSE message (the output guard counts them)
        if self._pending:
            rest = self._join(data, cut, now_ns)
        elif cut >= 0:
            self._complete(data[:cut], now_ns)
            rest = data[cut + 2 :]
        else:
            rest = data
        if rest:
            # A read may end between the two newlines of a separator; the leftover newline
            # would hide a complete trailing payload from the speculative release.
            rest = rest.lstrip()
            if rest:
                self._hold(rest)
                self._speculate(now_ns)

    def _begin(self) -> bytes:
        """The bytes so far once the first one that is not whitespace says SSE, else none."""
        data = self.chunks[0] if len(self.chunks) == 1 else b"".join(self.chunks)
        start = data.lstrip()[:1]
        if not start:
            return b""
        self._whole = start in (b"{", b"[")
        self._sse = not self._whole
        return data if self._sse else b""

    def _lf(self, data: bytes) -> bytes:
        """``data`` with CRLF made LF; a final "\r" is held back for the next read."""
        if self._cr:
            data = b"\r" + data
            self._cr = False
        if data.endswith(b"\r"):  # maybe half of a "\r\n" split between reads
            data = data[:-1]
            self._cr = True
        return data.replace(b"\r\n", b"\n")

    def _join(self, data: bytes, cut: int, now_ns: int) -> bytes:
        """Complete the held event with ``data`` if it holds a separator, or the seam does; the
        bytes after it, else hold ``data`` too and return nothing."""
        pending = self._pending
        seam = data.startswith(b"\n") and pending[-1].endswith(b"\n")
        if cut >= 0:
            if self._pending_len + cut > self.max_event_bytes:
                self._too_large("an SSE event")
            pending.append(data[:cut])
            part = b"".join(pending)  # the one copy of the held bytes
            rest = data[cut + 2 :]
        elif seam:
            part = b"".join(pending)[:-1]
            rest = data[1:]
        else:
            self._hold(data)
            self._speculate(now_ns)
            return b""
        self._drop_pending()
        self._complete(part, now_ns)
        return rest

    def _hold(self, piece: bytes) -> None:
        """Keep ``piece`` of an event that is not complete yet."""
        self._pending.append(piece)
        self._pending_len += len(piece)
        if self._depth is not None:
            self._depth += piece.count(b"{") - piece.count(b"}")
        elif self._pending_len > SPECULATE_PARSE_MAX:
            held = b"".join(self._pending)
            self._pending = [held]
            self._depth = held.count(b"{") - held.count(b"}")
        else:
            return
        if self._pending_len > self.max_event_bytes:
            self._too_large("an SSE event")

    def _check_sizes(self, data: bytes) -> None:
        """Raise EventTooLarge when a read longer than the bound completes an event longer
        than it (a held event's bytes count with its end)."""
        start, held = 0, self._pending_len
        while (cut := data.find(b"\n\n", start)) >= 0:
            if held + cut - start > self.max_event_bytes:
                self._too_large("an SSE event")
            start, held = cut + 2, 0

    def _too_large(self, what: str) -> None:
        """Fail the request: ``what`` is over ``max_event_bytes``; its bytes are let go."""
        self.chunks = []
        self._drop_pending()
        limit = self.max_event_bytes
        size = f"{limit / 2**20:g} MiB" if limit >= 2**20 else f"{limit} bytes"
        raise EventTooLarge(
            f"{what} longer than {size} (MAX_EVENT_BYTES): the answer is not held further"
        )

    def _drop_pending(self) -> None:
        self._pending = []
        self._pending_len = 0
        self._depth = None
        self._retry_at = 0

    def _speculate(self, now_ns: int) -> None:
        """Release a held ``data:`` payload that is already complete JSON (or ``[DONE]``), so a
        TCP segment that ends right before ``\\n\\n`` is not stamped late; upstream's
        ``StreamedResponseHandler.add_chunk`` does the same on every read."""
        pending = self._pending
        if len(pending[0]) < 5 and len(pending) > 1:  # "dat" then "a: {...": join the prefix
            self._pending = pending = [b"".join(pending)]
        if not pending[0].startswith(b"data:"):
            return  # a multi-field event or a comment waits for its separator
        if not pending[-1][-64:].rstrip().endswith((b"}", b"]")):
            return  # not the end of a JSON object, nor of [DONE]
        if self._depth is not None and (self._depth or self._pending_len < self._retry_at):
            # A large event whose braces do not balance yet; or they did at a read that did not
            # end it (braces in its text): not again before it has doubled, so that however
            # its reads fall, it is parsed a bounded number of times its size.
            return
        event = pending[0] if len(pending) == 1 else b"".join(pending)
        payload = event[5:].strip()
        if payload != b"[DONE]":
            try:
                orjson.loads(payload)
            except orjson.JSONDecodeError:
                if self._depth is not None:
                    self._retry_at = 2 * self._pending_len
                return  # incomplete; wait for more bytes
        self._drop_pending()
        self._complete(event, now_ns)

    def finish(self, now_ns: int) -> None:
        """End of body: the last event if it is whole, then the check of the whole body (once
        per response: is it SSE, are its data events JSON objects, did [DONE] come)."""
        if self._finished:
            return
        self._finished = True
        if self._whole:
            self._read_whole(b"".join(self.chunks), now_ns)
        elif self._whole is False:
            if self._pending:
                tail = b"".join(self._pending)
                self._drop_pending()
                payload = data_of(tail.strip())
                if payload is None or payload == b"[DONE]" or _is_json(payload):
                    self._complete(tail, now_ns)
                else:  # upstream drops an incomplete last message; so does loadgen
                    self._cut_tail = True
            self._check()

    def _check(self) -> None:
        """Fail a body that is not SSE or has a data event that is not a JSON object, as
        upstream's ``json.loads`` fails them; find a ``[DONE]`` that was not last in its read.

        The events counted while streaming account for every data event of a well-formed
        stream: those with choices (JSON by their bytes), the others read whole (usage,
        metrics), [DONE]; an error event is not among them. The newlines counted as each read
        came (``feed``) confirm it when every event is one line; else one ``data:``
        count, and a look for llama.cpp's ``error:`` field; only a body they cannot account
        for (a multi-line event, ``data:`` inside generated text, a stray event, an error
        event) is split and its events parsed, and its errors read.
        """
        chunks = self.chunks
        first = chunks[0] if len(chunks[0]) >= 256 or len(chunks) == 1 else b"".join(chunks)
        head = first[:256].lstrip() or first.lstrip()
        if not _SSE_START.match(head):
            self._fail(f"the answer is not SSE: it begins {head[:80]!r}")
            return
        known = self._choices + self._side_ok + self.done
        objects = known - self.done  # events that must be JSON objects: the rest is [DONE]
        last = chunks[-1] if len(chunks[-1]) >= 4 or len(chunks) == 1 else b"".join(chunks[-4:])
        body = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        if (
            last.endswith((b"\n\n", b"\r\n\r\n"))
            and self._lfs == 2 * known
            and _object_shaped(body, objects, self.done, one_line=True)
        ):
            return  # every event is one data line and two newlines, all accounted for
        if (
            not self._cut_tail
            and sz.count(body, b"data:") == known
            and not (body.startswith(b"error:") or b"\nerror:" in body)
            and _object_shaped(body, objects, self.done, one_line=False)
        ):
            return  # comments, or multi-field events, and every data event accounted for
        blocks = body.replace(b"\r\n", b"\n").split(b"\n\n")
        if self._cut_tail:
            blocks.pop()
        number = 0
        for block in blocks:
            block = block.strip()
            payload = data_of(block)
            if payload is None:
                if block.startswith(b"error:") or b"\nerror:" in block:
                    self._field_error(block)
                continue
            number += 1
            if payload == b"[DONE]":
                self.done = True
                continue
            obj = _json_object(payload)
            if obj is None:
                self._fail(
                    f"the stream's data event {number} is not a JSON object: {payload[:80]!r}"
                )
                return
            self._take_error(obj)

    def _fail(self, reason: str) -> None:
        """A body that is not what it should be counts no token event (upstream fails it)."""
        self.invalid = reason
        del self.event_ns[:]

    def _complete(self, part: bytes, now_ns: int) -> None:
        """Account for whole events that arrived at ``now_ns``.

        Usage is looked for only as the last of the part, metrics in its last event and [DONE]
        only in its tail, so a part costs a few SIMD scans however many events it holds.
        (Error events are found by ``_check``.)
        """
        # Inlined for the paced stream's one event per read: each call costs there.
        n = sz.count(part, _COMPACT_CHOICES) or _count_other_choices(part)
        if n:
            self._choices += n
            tokens = self._count(part, n) if self.chat else n
            if tokens == 1:
                self.event_ns.append(now_ns)
            elif tokens:
                self.event_ns.extend([now_ns] * tokens)
        end = len(part)  # of the events before a [DONE] that ends the part
        if (part.endswith(b"]") or part[-1:].isspace()) and _ends_stream(part[-16:]):
            self.done = True
            end = part.rfind(b"\n\n")
        found: dict[int, list[int]] | None = None  # event start -> [end, why it is read]
        at = part.rfind(b'"usage"')
        if at >= 0 and not part.startswith(b'"usage":null', at):
            found = _mark(found, part, at, _USAGE)
        # vLLM sends its metrics object on the final (usage) chunk: looked for in the last
        # event of the part, and read from every event read whole. Scanning every token event
        # for it cost a tenth of the parser's time on streams that have none.
        at = part.find(b'"metrics"', part.rfind(b"\n\n", 0, end) + 1, end) if end > 0 else -1
        if at >= 0:
            found = _mark(found, part, at, _METRICS)
        if found:
            for start in sorted(found):
                end, why = found[start]
                self._read_event(part[start:end].strip(), why)

    def _count(self, part: bytes, n: int) -> int:
        """Token events among the ``n`` choices-bearing chat events of ``part``."""
        count = _count_chat(part, n)
        if count >= 0:
            return count
        count = 0
        for block in part.split(b"\n\n"):
            payload = data_of(block.strip())
            if payload and is_token_event(payload, chat=True):
                count += 1
        return count

    def _read_event(self, block: bytes, why: int) -> None:
        """JSON-parse one event that carries usage or metrics. Usage on a token event is not
        read (upstream's ``elif``: the text is re-tokenised instead); the metrics object is read
        from any event, and an error on it is kept."""
        payload = data_of(block)
        if payload is None:
            return
        try:
            obj = orjson.loads(payload)
        except orjson.JSONDecodeError:
            return  # counted by _check, which fails the response
        if not isinstance(obj, dict):
            return
        choices = count_token_events(payload) > 0
        if not choices:
            self._side_ok += 1
        self._take_metrics(obj)
        if why & _USAGE:
            self._take_cached(obj)  # llama.cpp's completions send it on a token event
            if not (choices and is_token_event(payload, self.chat)):
                self._take_usage(obj)
        self._take_error(obj)

    def _take_usage(self, obj: dict[str, Any]) -> None:
        counts = obj.get("usage")
        if isinstance(counts, dict):
            completion = _count_of(counts, "completion_tokens")
            prompt = _count_of(counts, "prompt_tokens")
            if completion >= 0:
                self.completion_tokens = completion
            if prompt >= 0:
                self.prompt_tokens = prompt

    def _take_cached(self, obj: dict[str, Any]) -> None:
        """The prompt tokens served from the server's prefix cache: ``usage.prompt_tokens_details
        .cached_tokens`` (OpenAI's key: vLLM with --enable-prompt-tokens-details, SGLang with
        --enable-cache-report, llama.cpp), else llama.cpp's ``timings.cache_n``."""
        usage = obj.get("usage")
        details = usage.get("prompt_tokens_details") if isinstance(usage, dict) else None
        cached = _count_of(details, "cached_tokens") if isinstance(details, dict) else -1
        if cached < 0 and isinstance(timings := obj.get("timings"), dict):
            cached = _count_of(timings, "cache_n")
        if cached >= 0:
            self.cached_tokens = cached

    def _take_metrics(self, obj: dict[str, Any]) -> None:
        metrics = obj.get("metrics")
        if isinstance(metrics, dict):
            self.server_queue_s = _seconds(metrics.get("queue_time_ms"))
            self.server_ttft_s = _seconds(metrics.get("time_to_first_token_ms"))

    def _take_error(self, obj: dict[str, Any]) -> None:
        """An event whose ``error`` is set (vLLM, SGLang, llama.cpp, TGI: ``{"error": {...}}``
        or ``{"error": "..."}``; upstream's Responses backend tests ``data.get("error")``), or a
        flat ``{"object": "error", ...}``. The first one is kept."""
        error = obj.get("error")
        if not error and obj.get("object") == "error":
            error = obj
        if error and self.error is None:
            self.error = _message(error)

    def _field_error(self, block: bytes) -> None:
        """An ``error: {...}`` field line (older llama.cpp builds' stream error)."""
        for line in block.split(b"\n"):
            if line.startswith(b"error:") and self.error is None:
                value = line[6:].strip()
                try:
                    error = orjson.loads(value)
                except orjson.JSONDecodeError:
                    error = value.decode("utf-8", "replace")
                self.error = _message(error) if error else "an empty error field"

    def _read_whole(self, body: bytes, now_ns: int) -> None:
        """A non-streamed answer: one token event at its end when it has output, its usage."""
        try:
            obj = orjson.loads(body)
        except orjson.JSONDecodeError:
            self.invalid = f"the answer is neither SSE nor JSON: it begins {body.lstrip()[:80]!r}"
            return
        if not isinstance(obj, dict):
            return
        choices = obj.get("choices")
        if isinstance(choices, list) and choices and _has_output(choices[0], self.chat):
            self.event_ns.append(now_ns)
        self._take_usage(obj)
        self._take_cached(obj)
        self._take_metrics(obj)
        self._take_error(obj)


def _mark(
    found: dict[int, list[int]] | None, part: bytes, at: int, why: int
) -> dict[int, list[int]]:
    """Note that the event of ``part`` around offset ``at`` is to be read, and why."""
    start = part.rfind(b"\n\n", 0, at) + 1  # 0 when the event opens the part
    if found is None:
        found = {}
    if start in found:
        found[start][1] |= why
    else:
        end = part.find(b"\n\n", at)
        found[start] = [len(part) if end < 0 else end, why]
    return found


def _count_of(usage: dict[str, Any], key: str) -> int:
    """A usage count, or -1 when absent or not an integer."""
    value = usage.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) else -1


def _message(error: Any) -> str:
    """The message of an error object, or the object itself as one line."""
    if isinstance(error, dict):
        message = error.get("message")
        if isinstance(message, str) and message:
            return message
        return orjson.dumps(error).decode()
    return str(error)


def _object_shaped(body: bytes, objects: int, done: bool, one_line: bool) -> bool:
    """Whether the ``objects`` data events that must be JSON objects look like ones: as many
    payloads open with ``{`` (``data: {``, ``data:{``) and as many events end with ``}`` (before
    a separator, or at the body's end). Neither pattern can come from inside a JSON string but
    ``data: {`` (text may hold it: then the counts disagree and every event is parsed). A body
    with an event whose payload is not object-shaped, ``"choices":[{`` or not, disagrees.

    First, when every event is one line (``one_line``), one count for the common body (vLLM's,
    SGLang's): object events one after the other, then ``[DONE]``. A separator cannot be inside
    an event, so each ``}\n\ndata: {`` is the seam of two object-shaped events; ``objects - 1``
    seams, the first event's start and the last one's end account for every start and end."""
    if (
        one_line
        and objects
        and body.startswith(b"data: {")
        and body.endswith(b"}\n\ndata: [DONE]\n\n" if done else b"}\n\n")
        and sz.count(body, b"}\n\ndata: {") == objects - 1
    ):
        return True
    starts = sz.count(body, b"data: {")
    if starts != objects and starts + sz.count(body, b"data:{") != objects:
        return False
    ends = sz.count(body, b"}\n\n") or sz.count(body, b"}\r\n\r\n")
    return ends + body.endswith((b"}", b"}\n", b"}\r\n")) == objects


def _is_json(payload: bytes) -> bool:
    try:
        orjson.loads(payload)
    except orjson.JSONDecodeError:
        return False
    return True


def _json_object(payload: bytes) -> dict[str, Any] | None:
    """``payload`` parsed when it is a JSON object (what upstream's ``data.get`` needs)."""
    try:
        obj = orjson.loads(payload)
    except orjson.JSONDecodeError:
        return None
    return obj if isinstance(obj, dict) else None


def _has_output(choice: Any, chat: bool) -> bool:
    """Whether the first choice of a non-streamed answer holds generated output."""
    if not chat:
        return isinstance(choice, dict)
    message = choice.get("message") if isinstance(choice, dict) else None
    return isinstance(message, dict) and has_streamed_output({"delta": message})
