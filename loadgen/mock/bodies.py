"""Reading request bodies: the error a malformed one raises, and how chat messages become text.

A handler raises :class:`RequestError`; the middleware in :mod:`loadgen.mock.app` turns it into
the personality's error answer, in one place.
"""

from __future__ import annotations

from typing import Any

import orjson
from aiohttp import web

from loadgen.mock.personalities.base import Answer, Personality


class RequestError(Exception):
    """A request refused; answered by the middleware in the personality's shape."""

    def __init__(self, status: int, message: str, answer: Answer | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.answer = answer  # a whole answer, when not the personality's error(status, message)


async def read_json(request: web.Request, personality: Personality) -> dict[str, Any]:
    """The request's body, which must be a JSON object."""
    try:
        body = orjson.loads(await request.read())
    except orjson.JSONDecodeError as exc:
        message = f"Invalid JSON body: {exc}"
        raise RequestError(400, message, personality.invalid_json(message)) from None
    if not isinstance(body, dict):
        raise RequestError(400, "The request body must be a JSON object.")
    return body


def int_param(body: dict[str, Any], key: str, minimum: int) -> int | None:
    """The integer ``body[key]`` (None when absent), at least ``minimum``."""
    value = body.get(key)
    if value is None:
        return None
    if type(value) is not int:
        raise RequestError(400, f"{key} must be an integer, got {value!r}.")
    if value < minimum:
        raise RequestError(400, f"{key} must be at least {minimum}, got {value}.")
    return value


def render_chat(messages: Any) -> str:
    """Render chat messages as ``"role: text\\n"`` lines, the prompt text the mock tokenizes.

    List contents contribute their ``text`` parts only; other parts (images, ...) are ignored.
    """
    if not isinstance(messages, list) or not messages:
        raise RequestError(400, "messages must be a non-empty list")
    lines = []
    for message in messages:
        if not isinstance(message, dict):
            raise RequestError(400, "each message must be an object")
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
            raise RequestError(400, "message content must be a string or a list of parts")
        lines.append(f"{message.get('role', 'user')}: {content}\n")
    return "".join(lines)
