"""The answer to a pooling request (embeddings, pooling): one body, read whole, stamped once.

Upstream times a pooling request to the end of its body (TTFT = E2EL) and keeps one figure from
it, ``usage.prompt_tokens``. The body is mostly floats, so it is not parsed: the usage object is
found from the end and only its ``prompt_tokens`` is read. With ``encoding_format`` ``bytes`` the
usage travels in a JSON ``metadata`` header; with ``bytes_only`` there is none, and the
coordinator counts the dataset's prompt length instead, as upstream does.
"""

from __future__ import annotations

import re
from array import array
from collections.abc import Mapping

import orjson

# How the answer carries its usage, by the request's encoding_format (WorkerConfig.response_form).
JSON_BODY = "json"
METADATA_HEADER = "bytes"
NO_USAGE = "bytes_only"
POOLING_FORMS = (JSON_BODY, METADATA_HEADER, NO_USAGE)

_PROMPT_TOKENS = re.compile(rb'"prompt_tokens"\s*:\s*(\d+)')


def prompt_tokens_of_body(body: bytes) -> int:
    """``usage.prompt_tokens`` of a JSON answer, or 0 when it reports none (as upstream)."""
    at = body.rfind(b'"usage"')
    if at < 0:
        return 0
    found = _PROMPT_TOKENS.search(body, at)
    return int(found.group(1)) if found else 0


class PooledAnswer:
    """What a pooling answer gave: its one completion instant and the prompt tokens counted."""

    __slots__ = ("completion_tokens", "error", "event_ns", "prompt_tokens")

    def __init__(self) -> None:
        self.event_ns: array[int] = array("q")
        self.prompt_tokens = -1  # -1: not reported; the coordinator uses the dataset's length
        self.completion_tokens = -1
        self.error: str | None = None

    def read(self, form: str, body: bytes, headers: Mapping[str, str], now_ns: int) -> None:
        """Take in the whole body of a 200 answer, which arrived at ``now_ns``."""
        if form == JSON_BODY:
            if not body.lstrip().startswith(b"{"):
                self.error = f"the answer is not a JSON object: {body[:80]!r}"
                return
            self.prompt_tokens = prompt_tokens_of_body(body)
        elif form == METADATA_HEADER:
            metadata = headers.get("metadata")
            if metadata is None:
                self.error = "encoding_format bytes: the answer has no metadata header"
                return
            try:
                usage = orjson.loads(metadata).get("usage") or {}
                self.prompt_tokens = int(usage.get("prompt_tokens", 0))
            except (orjson.JSONDecodeError, AttributeError, TypeError, ValueError):
                self.error = f"encoding_format bytes: unreadable metadata header: {metadata[:80]}"
                return
        self.event_ns.append(now_ns)
