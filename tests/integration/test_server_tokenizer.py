"""The server tokenizer against small in-process servers that misbehave like llama.cpp's (the
adaptive concurrency limit on its own: tests/unit/server/test_adaptive_limit.py)."""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from fake_tokenizer_server import FakeServer, serving

from loadgen import progress_bar
from loadgen.server import tokenizer as server_tokenizer
from loadgen.server.client import ServerClient
from loadgen.server.errors import ConnectionLost, NotRetryable, ServerUnreachable
from loadgen.server.tokenizer import (
    LLAMA_CPP_FORM,
    RETRY_ATTEMPTS,
    RETRY_BACKOFF,
    RETRY_INTERVAL_S,
    VLLM_FORM,
    BuildTimeout,
    ServerTokenizer,
)

TEXTS = [f"Prompt number {i}: the quick brown fox jumps over the lazy dog." for i in range(120)]


def against(server: FakeServer, body: Callable[[ServerTokenizer], Awaitable[Any]]) -> Any:
    """Connect a ServerTokenizer to ``server`` and run ``body`` with it."""

    async def run() -> Any:
        async with serving(server):
            client = ServerClient(server.url, {})
            try:
                tokenizer = await ServerTokenizer.connect(client, "any", 0, 1)
                return await body(tokenizer)
            finally:
                await client.close()

    return asyncio.run(run())


async def round_trip(tokenizer: ServerTokenizer) -> tuple[list[list[int]], list[str]]:
    ids = await asyncio.to_thread(tokenizer.encode_batch, TEXTS)
    return ids, await asyncio.to_thread(tokenizer.decode_batch, ids)


def timed_against(server: FakeServer, body: Callable[[ServerTokenizer], Awaitable[Any]]) -> float:
    """Seconds ``against(server, body)`` takes here, now: the floor a time bound is built on."""
    started = time.monotonic()
    against(server, body)
    return time.monotonic() - started


async def one_call(tokenizer: ServerTokenizer) -> None:
    await tokenizer.aencode_batch(["one text"])


def test_connections_closed_without_an_answer_are_retried(terminal, capsys) -> None:
    server = FakeServer()

    async def build(tokenizer: ServerTokenizer) -> tuple[list[list[int]], list[str]]:
        server.drop_every = 7
        tokenizer.begin_build(10, len(TEXTS), progress=False)
        try:
            return await round_trip(tokenizer)
        finally:
            tokenizer.end_build()

    _, texts = against(server, build)
    assert texts == TEXTS
    assert server.dropped >= 30
    out = capsys.readouterr().out
    # One line when it first happens, one count at the end: not a line per retry.
    assert len(re.findall(r"connection to http://\S+/(de)?tokenize closed without an answer "
                          r"\(server disconnected\): retrying", out)) == 1, out  # fmt: skip
    assert re.search(r"^\d+ server tokenizer calls were sent again", out, re.M), out


def test_a_connection_that_keeps_breaking_fails_after_a_bounded_number_of_tries() -> None:
    server = FakeServer()

    async def body(tokenizer: ServerTokenizer) -> None:
        server.drop_every = 1
        await tokenizer.aencode_batch(["one text"])

    one_call_s = timed_against(FakeServer(), one_call)  # connect and one call, answered
    started = time.monotonic()
    with pytest.raises(ConnectionLost, match=f"closed without an answer.*tried {RETRY_ATTEMPTS}"):
        against(server, body)
    elapsed = time.monotonic() - started
    assert server.dropped == RETRY_ATTEMPTS
    # The pauses between tries (0.05 s, doubling: 0.75 s), a call's time per try, and as much
    # again as the pauses for what a try costs beyond a call (a new connection, its close):
    # a longer backoff (3x: 2 s of pauses) or more tries fail it.
    pauses_s = sum(RETRY_INTERVAL_S * RETRY_BACKOFF**k for k in range(RETRY_ATTEMPTS - 1))
    assert elapsed < 2 * pauses_s + RETRY_ATTEMPTS * one_call_s, (elapsed, one_call_s)


def test_concurrency_adapts_to_a_server_with_few_threads() -> None:
    # Four "threads": a fifth call in flight waits 1 s, as llama.cpp's queued connections wait
    # for an idle one to close. 64 at once would stall almost every call.
    server = FakeServer(threads=4, stall_s=1.0, delay_s=0.002)
    unstalled_s = timed_against(FakeServer(delay_s=0.002), round_trip)  # the same, no threads
    started = time.monotonic()
    tokenizer, (_, texts) = against(server, lambda t: _with(t, round_trip(t)))
    elapsed = time.monotonic() - started
    assert texts == TEXTS
    # The calls that stalled did so together, once (encode and decode: at most twice): a
    # stall's time or two beyond the same round trip unstalled, not one per batch.
    assert elapsed < unstalled_s + 2 * server.stall_s, (elapsed, unstalled_s, server.stalls)
    assert tokenizer.calls.limit.ceiling <= 5


def test_concurrency_grows_while_answers_stay_quick() -> None:
    server = FakeServer(delay_s=0.005)
    against(server, round_trip)
    assert 8 < server.peak <= 64


def test_the_build_is_bounded_by_its_timeout() -> None:
    server = FakeServer(delay_s=0.05)

    async def build(tokenizer: ServerTokenizer) -> None:
        tokenizer.begin_build(0.4, 5000, progress=False)
        # about 190 rounds of 64 calls of 50 ms: 9 s or more, far past the bound below
        await asyncio.to_thread(tokenizer.encode_batch, TEXTS * 100)

    one_call_s = timed_against(FakeServer(delay_s=0.05), one_call)  # connect and one call
    started = time.monotonic()
    with pytest.raises(BuildTimeout) as info:
        against(server, build)
    elapsed = time.monotonic() - started
    # Connecting, the 0.4 s timeout, and the calls in flight cut short: a call's time at most
    # (three calls' of room: the load of a busy machine moves between the two measurements).
    assert elapsed < 0.4 + 3 * one_call_s, (elapsed, one_call_s)
    message = str(info.value)
    assert re.fullmatch(
        r"building the dataset of 5,000 prompts through the server's /tokenize and /detokenize: "
        r"\d+ calls answered after \d+ s; pass --tokenizer to use a local tokenizer, or raise "
        r"--server-tokenizer-timeout-sec",
        message,
    ), message


def test_calls_after_the_build_have_no_deadline() -> None:
    server = FakeServer(delay_s=0.05)

    async def body(tokenizer: ServerTokenizer) -> list[list[int]]:
        tokenizer.begin_build(0.01, 10, progress=False)
        tokenizer.end_build()
        await asyncio.sleep(0.05)
        return await tokenizer.aencode_batch(TEXTS[:3])

    assert len(against(server, body)) == 3


def test_progress_shows_for_long_builds_only(capsys, monkeypatch) -> None:
    server = FakeServer()

    def build(progress: bool) -> Callable[[ServerTokenizer], Awaitable[Any]]:
        async def run(tokenizer: ServerTokenizer) -> None:
            tokenizer.begin_build(10, len(TEXTS), progress=progress)
            await round_trip(tokenizer)
            tokenizer.end_build()

        return run

    monkeypatch.setattr(progress_bar, "on_terminal", lambda: True)
    against(server, build(progress=True))  # well under PROGRESS_DELAY_S
    assert "Building the dataset" not in capsys.readouterr().err
    monkeypatch.setattr(server_tokenizer, "PROGRESS_DELAY_S", 0.0)
    against(server, build(progress=False))  # --disable-tqdm
    assert "Building the dataset" not in capsys.readouterr().err
    against(server, build(progress=True))
    assert re.search(r"Building the dataset with the server's tokenizer: \d+ calls", (
        capsys.readouterr().err
    ))  # fmt: skip


def test_off_a_terminal_progress_is_plain_lines(terminal, capsys, monkeypatch) -> None:
    monkeypatch.setattr(progress_bar, "on_terminal", lambda: False)
    monkeypatch.setattr(progress_bar, "PLAIN_EVERY_S", 0.0)

    async def run(tokenizer: ServerTokenizer) -> None:
        tokenizer.begin_build(10, len(TEXTS), progress=True)
        await round_trip(tokenizer)
        tokenizer.end_build()

    against(FakeServer(), run)
    err = capsys.readouterr().err
    assert re.search(
        r"^Building the dataset with the server's tokenizer: 1 calls, \d+ s$", err, re.M
    )
    assert "\r" not in err


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ({"status": {"/detokenize": 400}}, r"POST http://\S+/detokenize answered HTTP 400: nope"),
        ({"not_json": True}, r"POST http://\S+/detokenize answered something that is not JSON"),
    ],
)
def test_answers_a_retry_cannot_fix_fail_at_once(breakage: dict[str, Any], message: str) -> None:
    server = FakeServer()

    async def body(tokenizer: ServerTokenizer) -> None:
        for name, value in breakage.items():
            setattr(server, name, value)
        seen = len(server.bodies)
        try:
            await tokenizer.adecode_batch([[5, 6, 7]])
        finally:
            assert len(server.bodies) == seen + 1

    with pytest.raises(NotRetryable, match=message):
        against(server, body)


def test_each_form_is_detected_and_used_for_every_call() -> None:
    for form, key in ((LLAMA_CPP_FORM, "content"), (VLLM_FORM, "prompt")):
        server = FakeServer(form=form)
        tokenizer, (_, texts) = against(server, lambda t: _with(t, round_trip(t)))
        assert tokenizer.form == form
        assert texts == TEXTS
        assert tokenizer.vocab_size == 8192 and tokenizer.num_special_tokens == 1
        tokenize_bodies = [b for path, b in server.bodies if path == "/tokenize"]
        if form == LLAMA_CPP_FORM:  # the probe's first try is vLLM's; every later call is not
            assert "prompt" in tokenize_bodies[0]
            tokenize_bodies = tokenize_bodies[1:]
        assert all(key in b for b in tokenize_bodies)


def test_a_server_without_tokenize_fails_naming_the_status_and_the_way_out() -> None:
    server = FakeServer(status={"/tokenize": 404})
    with pytest.raises(NotRetryable) as info:
        against(server, lambda t: asyncio.sleep(0))
    assert re.fullmatch(
        r"POST http://\S+/tokenize answered HTTP 404: nope; pass --tokenizer", str(info.value)
    )
    assert len(server.bodies) == 1  # a 404 means no endpoint: the other form is not tried


def test_a_refused_connection_is_not_a_lost_one() -> None:
    async def run() -> None:
        client = ServerClient("http://127.0.0.1:9", {})
        try:
            await ServerTokenizer.connect(client, "any", 0, 1)
        finally:
            await client.close()

    with pytest.raises(ServerUnreachable) as info:
        asyncio.run(run())
    assert not isinstance(info.value, ConnectionLost)
    assert "cannot reach http://127.0.0.1:9/tokenize" in str(info.value)


async def _with(value: Any, awaitable: Awaitable[Any]) -> tuple[Any, Any]:
    return value, await awaitable
