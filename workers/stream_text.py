"""The generated text of a finished stream, for the output count upstream re-tokenises when the
server sent no usage it reads (workers/sse.py decides that). Run once per response, after the
stream is closed: it reads the whole body, which the parser never does.

The text a worker keeps of one request is capped (``kept_text``): ``TEXT_CHARS_PER_EVENT``
characters for each token event its output guard allows (twice max_tokens and 64: a token is
a few characters, 64 is far above any tokenizer's longest), or ``TEXT_CAP_NO_GUARD`` (1 MiB)
for a request without max_tokens. A server that sends more (one 100 MB line of "text") is
counted (the record's ``text_capped``, ``loadgen.text_capped``) and the coordinator
re-tokenises the cap, never more.
"""

from __future__ import annotations

import orjson
import stringzilla as sz

from workers.sse import data_of, is_token_event

TEXT_CHARS_PER_EVENT = 64  # kept characters per token event of the output guard
TEXT_CAP_NO_GUARD = 2**20  # kept characters of a request without max_tokens (no guard)


def text_cap(guard: int) -> int:
    """The most characters kept of a request whose output guard is ``guard`` events (0: none)."""
    return guard * TEXT_CHARS_PER_EVENT if guard > 0 else TEXT_CAP_NO_GUARD


def kept_text(chunks: list[bytes], chat: bool, choice_events: int, cap: int) -> tuple[str, bool]:
    """``generated_text`` cut to its first ``cap`` characters, and whether it was cut."""
    text = generated_text(chunks, chat, choice_events)
    if len(text) <= cap:
        return text, False
    return text[:cap], True


def generated_text(chunks: list[bytes], chat: bool, choice_events: int = -1) -> str:
    """Concatenate the generated text of a finished stream (run after the stream is closed);
    ``choice_events``, when known, is how many events had choices (``SSEStream.choice_events``).
    """
    body = b"".join(chunks)
    if body.lstrip()[:1] == b"{":
        return _whole_text(body, chat)
    text = _plain_text(body, chat, choice_events)
    return text if text is not None else _text_event_by_event(body, chat)


def _plain_text(body: bytes, chat: bool, choice_events: int) -> str | None:
    """The text by the body's ``"text":"`` (chat: ``"content":"``) keys, when that is exact:
    no escape in the body (so every such key is a key, and its string ends at the next quote),
    and for completions one key per event with choices (upstream reads ``choices[0].text`` of
    each). A chat delta's content outside a token event is the empty string, so every content
    string is the text's. Else None.

    Parsing each event cost ~250 µs for a 128-token stream, more than the rest of the request;
    a slice per event after StringZilla's split costs about 18, and ``_regular_text`` about 7
    where it applies (timed ad hoc; client_ceiling.py --shape usage-on-choices measures the run).
    """
    if b"\\" in body:
        return None  # escapes (newlines, quotes, \u sequences): JSON-decode them
    key = b'"content":' if chat else b'"text":'
    key += b'"' if sz.contains(body, key + b'"') else b' "'  # compact, or a space after ":"
    keys = sz.count(body, key)
    if not chat and keys != choice_events:
        return None
    if keys >= 2 and (text := _regular_text(body, key, keys)) is not None:
        return text
    parts = sz.Str(body).split(key)  # the first holds no text
    texts = [part[:end] for part in parts[1:] if (end := part.find('"')) >= 0]
    if len(texts) != keys:
        return None
    try:
        return b"".join(texts).decode()
    except UnicodeDecodeError:
        return None


def _regular_text(body: bytes, key: bytes, keys: int) -> str | None:
    """The text when the bytes between one text and the next are the same for every pair (a
    server's token chunks differ only in their text: vLLM's, llama.cpp's within a second), else
    None. Split at that filler, the body is its head, the texts end to end, and its tail.

    Exact: every text key ends a match of the filler (any match does, no text holding a quote),
    so when there are ``keys - 1`` matches, the head is intact and the first quote after it
    starts the tail, no filler was left between two texts.
    """
    start = body.find(key) + len(key)
    end = body.find(b'"', start)
    second = body.find(key, end) if end >= 0 else -1
    if second < 0:
        return None
    last = body.rfind(key) + len(key)
    tail = len(body) - body.find(b'"', last)
    pieces = sz.Str(body).split(body[end : second + len(key)])
    if len(pieces) != keys:
        return None
    joined = b"".join(pieces)
    stop = joined.find(b'"', start)
    if stop != len(joined) - tail or joined[:start] != body[:start]:
        return None
    try:
        return joined[start:stop].decode()
    except UnicodeDecodeError:
        return None


def _text_event_by_event(body: bytes, chat: bool) -> str:
    """The generated text, each event JSON-parsed as upstream reads it."""
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
