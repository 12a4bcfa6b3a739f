"""The generated text of a finished stream, for the output count upstream re-tokenises when the
server sent no usage it reads (workers/sse.py decides that). Run once per response, after the
stream is closed: it reads the whole body, which the parser never does.
"""

from __future__ import annotations

import orjson
import stringzilla as sz

from workers.sse import data_of, is_token_event


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
    """The text by splitting the body at its ``"text":"`` (chat: ``"content":"``) keys, when
    that is exact: no escape in the body (so every such key is a key, and its string ends at the
    next quote), and for completions one key per event with choices (upstream reads
    ``choices[0].text`` of each). A chat delta's content outside a token event is the empty
    string, so every content string is the text's. Else None.

    Parsing each event cost ~250 µs for a 128-token stream, more than the rest of the request.
    StringZilla's split is a SIMD scan that returns views, not copies; what is left is a slice
    per event (client_ceiling.py --shape usage-on-choices measures it).
    """
    if b"\\" in body:
        return None  # escapes (newlines, quotes, \u sequences): JSON-decode them
    key = b'"content":' if chat else b'"text":'
    key += b'"' if sz.contains(body, key + b'"') else b' "'  # compact, or a space after ":"
    parts = sz.Str(body).split(key)  # views into the body; the first holds no text
    if not chat and len(parts) - 1 != choice_events:
        return None
    texts = [part[:end] for part in parts[1:] if (end := part.find('"')) >= 0]
    if len(texts) != len(parts) - 1:
        return None
    try:
        return b"".join(texts).decode()
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
