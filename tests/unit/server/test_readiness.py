"""The retry helper, headers, proxy resolution and error wording; no sockets."""

from __future__ import annotations

import asyncio
import errno
import math
import os
import time

import aiohttp
import pytest

from loadgen.server.client import _connection_lost, auth_headers, proxy_for, server_message
from loadgen.server.errors import (
    ConnectionLost,
    NotRetryable,
    ReadinessTimeout,
    ServerError,
    ServerUnreachable,
    describe_error,
)
from loadgen.server.retry import retry_with_timeout


def test_api_key_becomes_a_bearer_header_that_header_flags_override(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert auth_headers({}) == {"Authorization": "Bearer sk-test"}
    assert auth_headers({"Authorization": "Bearer other", "x-a": "1"}) == {
        "Authorization": "Bearer other",
        "x-a": "1",
    }
    monkeypatch.delenv("OPENAI_API_KEY")
    assert auth_headers({"x-a": "1"}) == {"x-a": "1"}


@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_proxy_from_the_environment_for_the_url_scheme(no_proxy_env) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert proxy_for("http://server.example:8000/v1/completions") == "http://proxy.example:3128"
    assert proxy_for("https://server.example/v1/completions") is None


def test_no_proxy_bypasses_it(no_proxy_env) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("NO_PROXY", "server.example")
    assert proxy_for("http://server.example:8000/v1/completions") is None


def test_no_proxy_configured(no_proxy_env) -> None:
    assert proxy_for("http://server.example:8000/v1/completions") is None


# --- retry_with_timeout ------------------------------------------------------------------------


class Flaky:
    """An operation that fails ``failures`` times with ``error``, then returns ``result``."""

    def __init__(self, failures: int, error: Exception, result: object = "ok") -> None:
        self.failures = failures
        self.error = error
        self.result = result
        self.calls = 0

    async def __call__(self) -> object:
        self.calls += 1
        if self.calls <= self.failures:
            raise self.error
        return self.result


def retry(timeout_s: float, interval_s: float, op, **kwargs):
    return asyncio.run(retry_with_timeout(timeout_s, interval_s, op, **kwargs))


def test_timeout_zero_is_exactly_one_attempt_and_passes_its_result_through() -> None:
    op = Flaky(0, ServerError("unused"), result={"id": 1})
    assert retry(0, 5, op) == {"id": 1}
    assert op.calls == 1


def test_timeout_zero_passes_the_exception_through_unchanged() -> None:
    error = ServerUnreachable("cannot reach http://127.0.0.1:1/v1/models: Connection refused")
    op = Flaky(1, error)
    with pytest.raises(ServerUnreachable) as info:
        retry(0, 5, op)
    assert info.value is error
    assert op.calls == 1


def test_success_after_transient_failures() -> None:
    op = Flaky(3, ServerError("HTTP 503: loading"))
    retries: list[tuple[str, float, float]] = []
    assert retry(5, 0.01, op, on_retry=lambda *a: retries.append(a)) == "ok"
    assert op.calls == 4
    assert [r[0] for r in retries] == ["HTTP 503: loading"] * 3
    assert all(0 < r[1] <= 0.01 and r[1] <= r[2] <= 5 for r in retries)


def test_deadline_error_names_the_timeout_and_the_last_error() -> None:
    op = Flaky(10**6, ServerError("HTTP 503: still loading"))
    with pytest.raises(ReadinessTimeout) as info:
        retry(0.2, 0.05, op, waiting_for="the model list")
    message = str(info.value)
    assert "the model list was not ready within --ready-check-timeout-sec 0.2" in message
    assert message.endswith("last error: HTTP 503: still loading")
    # Retried, and never more often than the 0.05 s pauses allow in 0.2 s (pauses are never
    # short; a busy machine makes them longer, so fewer calls is no fault).
    assert 2 <= op.calls <= 0.2 / 0.05 + 2


def test_never_sleeps_past_the_deadline() -> None:
    op = Flaky(10**6, ServerError("down"))
    started = time.monotonic()
    with pytest.raises(ReadinessTimeout):
        retry(0.3, 60, op)
    # Nearer the 0.3 s deadline than the 60 s pause: no machine is that slow, and a pause
    # past the deadline is never that quick.
    assert time.monotonic() - started < (0.3 + 60) / 2
    assert op.calls == 1


def test_an_attempt_is_cut_short_at_the_deadline() -> None:
    async def hangs() -> None:
        await asyncio.sleep(60)

    started = time.monotonic()
    with pytest.raises(ReadinessTimeout, match="no answer before the deadline"):
        retry(0.3, 0.05, hangs)
    assert time.monotonic() - started < (0.3 + 60) / 2  # nearer the deadline than the hang


@pytest.mark.parametrize("error", [NotRetryable("no models found"), KeyError("bug")])
def test_errors_that_waiting_cannot_fix_end_the_wait_at_once(error: Exception) -> None:
    op = Flaky(1, error)
    with pytest.raises(type(error)) as info:
        retry(30, 0.01, op)
    assert info.value is error
    assert op.calls == 1


def test_os_and_timeout_errors_are_retried() -> None:
    op = Flaky(2, ConnectionRefusedError(111, "Connection refused"))
    assert retry(5, 0.01, op) == "ok"
    op = Flaky(2, TimeoutError())
    assert retry(5, 0.01, op) == "ok"


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="interval_s > 0"):
        retry(5, 0, Flaky(0, ServerError("x")))


def test_describe_error_is_one_line() -> None:
    assert describe_error(ValueError("first\nsecond")) == "first"
    assert describe_error(ValueError()) == "ValueError"
    assert describe_error(TimeoutError()) == "no answer before the deadline"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"object":"error","message":"min_tokens too large","code":400}', "min_tokens too large"),
        (b'{"error":{"message":"bad key","type":"invalid_request_error"}}', "bad key"),
        (b'{"detail":"Not Found"}', "Not Found"),
        (b"upstream connect error\nmore", "upstream connect error"),
        (b"", ""),
    ],
)
def test_server_message_takes_the_openai_error_message(body: bytes, expected: str) -> None:
    assert server_message(400, body) == (f"HTTP 400: {expected}" if expected else "HTTP 400")


# --- retry_with_timeout with a bounded number of attempts (the server tokenizer's calls) -------


def test_attempts_bound_the_retries_and_the_last_error_is_raised_unchanged() -> None:
    error = ConnectionLost("connection to http://h/tokenize closed without an answer")
    op = Flaky(10, error)
    with pytest.raises(ConnectionLost) as info:
        retry(math.inf, 0.001, op, attempts=3, retry_on=(ConnectionLost,))
    assert info.value is error
    assert op.calls == 3
    op = Flaky(2, error)
    assert retry(math.inf, 0.001, op, attempts=3, retry_on=(ConnectionLost,)) == "ok"


def test_only_the_errors_named_are_retried() -> None:
    op = Flaky(1, ServerError("POST http://h/detokenize answered HTTP 500: invalid token"))
    with pytest.raises(ServerError, match="HTTP 500"):
        retry(5, 0.001, op, attempts=5, retry_on=(ConnectionLost,))
    assert op.calls == 1


def test_pauses_grow_by_the_backoff_factor() -> None:
    pauses: list[float] = []
    op = Flaky(4, ConnectionLost("lost"))
    retry(5, 0.01, op, backoff=2.0, on_retry=lambda error, wait, left: pauses.append(wait))
    assert pauses == pytest.approx([0.01, 0.02, 0.04, 0.08])


def test_the_deadline_still_ends_retries_that_name_other_errors() -> None:
    async def hangs() -> None:
        await asyncio.sleep(60)

    with pytest.raises(ReadinessTimeout):
        retry(0.2, 0.05, hangs, attempts=3, retry_on=(ConnectionLost,))


@pytest.mark.parametrize(
    ("error", "said"),
    [
        (aiohttp.ServerDisconnectedError(), "server disconnected"),
        (aiohttp.ClientOSError(errno.ECONNRESET, "reset"), os.strerror(errno.ECONNRESET)),
        # aiohttp's own wording, less the URL that the message names already.
        (aiohttp.ClientOSError(errno.EIO, "Can not write request body for http://h/v1"),
         "Can not write request body"),
        (aiohttp.ClientConnectionError("gone"), "gone"),
        (ConnectionResetError(errno.ECONNRESET, "reset"), os.strerror(errno.ECONNRESET)),
        (ConnectionRefusedError(errno.ECONNREFUSED, "refused"), None),  # never made
        (TimeoutError(), None),
    ],
)  # fmt: skip
def test_a_connection_that_broke_is_told_apart_from_one_never_made(
    error: BaseException, said: str | None
) -> None:
    assert _connection_lost(error) == said
