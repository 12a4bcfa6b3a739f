"""Secrets out of what a run keeps: header values and URL passwords, in argv and the config.

A records file is shared, so it never holds an API key: every ``--header`` value (any header
may carry a key) and the password of any URL become ``***``.
"""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import urlsplit, urlunsplit

REDACTED = "***"
# A URL's "scheme://user:" and its password, up to the last "@" before the path.
_URL_PASSWORD = re.compile(r"(?P<head>[A-Za-z][A-Za-z0-9+.-]*://[^/\s:@]*:)[^/\s]*@")


def redact_url(url: str) -> str:
    """``url`` with the password of its user part replaced by ``***``."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.netloc.rpartition("@")[2]
    return urlunsplit(parts._replace(netloc=f"{user}:{REDACTED}@{host}"))


def redact_text(text: str) -> str:
    """``text`` (a message) with the password of every URL in it replaced by ``***``; also for
    a URL that does not parse."""
    return _URL_PASSWORD.sub(rf"\g<head>{REDACTED}@", text)


def redact_header(item: str) -> str:
    """``KEY=VALUE`` as ``KEY=***`` (a value without ``=`` is hidden whole)."""
    key, eq, _ = item.partition("=")
    return f"{key}={REDACTED}" if eq else REDACTED


def redact_argv(argv: list[str]) -> list[str]:
    """A command line with its header values and URL passwords hidden."""
    out: list[str] = []
    in_headers = False
    for arg in argv:
        name, eq, value = arg.partition("=")
        if arg.startswith("-"):
            flag = name.replace("_", "-")
            in_headers = flag == "--header" and not eq
            if flag == "--header" and eq:
                arg = f"{name}={redact_header(value)}"
            elif eq:
                arg = f"{name}={redact_url(value)}"
        elif in_headers:
            arg = redact_header(arg)
        else:
            arg = redact_url(arg)
        out.append(arg)
    return out


def redact_config(config: dict[str, Any]) -> dict[str, Any]:
    """RunConfig's fields as a dict, with header values and URL passwords hidden."""
    out = dict(config)
    if out.get("headers"):
        out["headers"] = dict.fromkeys(out["headers"], REDACTED)
    for key in ("base_url", "host"):
        if isinstance(out.get(key), str):
            out[key] = redact_url(out[key])
    return out
