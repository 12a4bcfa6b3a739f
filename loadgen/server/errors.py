"""The ways the server can fail the coordinator, and how an error reads in one line."""

from __future__ import annotations

from loadgen.records.redact import redact_text


class ServerError(RuntimeError):
    """The server could not be used; the message names the URL (its password as ``***``) and
    what went wrong."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(redact_text(message))
        self.status = status  # the HTTP status when the server answered one


class ServerUnreachable(ServerError):
    """Nothing answered at the URL (connection refused, reset, DNS, or timed out)."""


class ConnectionLost(ServerUnreachable):
    """The connection closed or was reset before an answer; the server may never have seen the
    request, so an idempotent one can be sent again."""


class NotRetryable(ServerError):
    """An answer that waiting cannot change; ``retry_with_timeout`` passes it through at once."""


class ReadinessTimeout(ServerError):
    """The server was not ready before ``--ready-check-timeout-sec`` ran out."""


def describe_error(exc: BaseException) -> str:
    """One line for an exception: its message, or its type when it has none."""
    text = str(exc).strip()
    if isinstance(exc, TimeoutError) and not text:
        return "no answer before the deadline"
    return text.splitlines()[0] if text else type(exc).__name__
