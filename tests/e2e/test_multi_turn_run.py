"""Multi-turn conversations through the real CLI and workers: each turn carries the
conversation so far (the server's own answers included) and its X-Session-ID, a failed turn
ends its conversation, and the report has each turn index's figures."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from aiohttp import web
from helpers import (
    free_port,
    mock_server,
    mock_stats,
    only_json,
    run_against_mock,
    run_in_process,
)

CHAT = ["--backend", "openai-chat", "--endpoint", "/v1/chat/completions"]


class ChatServer:
    """A chat server that records every request and answers with a text naming the turn; the
    second turn of conversation 1 fails."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict]] = []

    async def chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        session = request.headers.get("X-Session-ID", "")
        self.requests.append((session, body))
        users = sum(1 for m in body["messages"] if m["role"] == "user")
        if session.endswith("conv-1") and users == 2:
            return web.json_response({"error": {"message": "boom"}}, status=500)
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        answer = f"answer to {session} turn {users - 1}"
        for piece in (answer[:6], answer[6:]):
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}}]}
            await response.write(f"data: {json.dumps(chunk)}\n\n".encode())
        usage = {
            "prompt_tokens": 10 * users,
            "completion_tokens": 2,
            "total_tokens": 10 * users + 2,
        }
        await response.write(f"data: {json.dumps({'choices': [], 'usage': usage})}\n\n".encode())
        await response.write(b"data: [DONE]\n\n")
        return response

    async def models(self, _: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "loadgen-mock", "root": "loadgen-mock"}]})


@pytest.fixture
def chat_server() -> Iterator[tuple[ChatServer, str]]:
    server = ChatServer()
    app = web.Application()
    app.router.add_post("/v1/chat/completions", server.chat)
    app.router.add_get("/v1/models", server.models)
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(app)
    loop.run_until_complete(runner.setup())
    port = free_port()
    loop.run_until_complete(web.TCPSite(runner, "127.0.0.1", port).start())
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield server, f"http://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


def test_each_turn_carries_the_conversation_and_a_failed_turn_ends_it(
    chat_server: tuple[ChatServer, str], tmp_path: Path
) -> None:
    server, url = chat_server
    run = run_in_process(
        "--base-url", url, "--model", "loadgen-mock", "--tokenizer", "loadgen-mock", *CHAT,
        "--multi-turn", "--num-prompts", "4", "--multi-turn-num-turns", "3", "--workers", "2",
        "--random-input-len", "16", "--random-output-len", "4", "--request-id-prefix", "t-",
        "--multi-turn-delay-ms", "5", "--no-fail-fast", "--save-result", "--save-detailed",
        "--result-dir", str(tmp_path),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    by_session: dict[str, list[dict]] = {}
    for session, body in server.requests:
        by_session.setdefault(session, []).append(body)
    assert sorted(by_session) == [f"t-conv-{c}" for c in range(4)]
    for session, bodies in by_session.items():
        expected_turns = 2 if session == "t-conv-1" else 3  # conversation 1 ends at its failure
        assert len(bodies) == expected_turns, session
        for k, body in enumerate(bodies):
            messages = body["messages"]
            assert [m["role"] for m in messages] == ["user", "assistant"] * k + ["user"]
            for j in range(k):  # the server's own answers, as it streamed them
                assert messages[2 * j + 1]["content"] == f"answer to {session} turn {j}"
                assert messages[2 * j] == bodies[j]["messages"][-1]  # the same user message
            assert body["min_tokens"] == 4  # the Rust client's rule for random conversations
    result = only_json(tmp_path)
    figures = result["loadgen"]["multi_turn"]
    assert (figures["conversations"], figures["completed"], figures["failed"]) == (4, 3, 1)
    assert [t["completed"] for t in figures["per_turn"]] == [4, 3, 3]
    assert [t["failed"] for t in figures["per_turn"]] == [0, 1, 0]
    assert [t["not_sent"] for t in figures["per_turn"]] == [0, 0, 1]  # its turn after the failure
    assert [t["mean_input_tokens"] for t in figures["per_turn"]] == [10, 20, 30]
    errors = [e for e in result["errors"] if e]
    assert any(e.startswith("HTTP 500") for e in errors)
    assert any(
        e.startswith("not sent: an earlier turn of this conversation failed (turn 1: HTTP 500")
        for e in errors
    )
    assert (
        "Multi-turn conversations" in run.stdout and "Conversations completed/total:" in run.stdout
    )


def test_sharegpt_conversations_run_every_turn_against_the_mock(tmp_path: Path) -> None:
    def conversation(n: int, turns: int) -> dict:
        messages = []
        for t in range(turns):
            messages.append({"from": "human", "value": f"question {t} of conversation {n} " * 3})
            messages.append({"from": "gpt", "value": f"answer {t} " * 5})
        return {"id": str(n), "conversations": messages}

    data = [conversation(n, turns) for n, turns in enumerate([3, 2, 4, 1])]  # 1 turn: skipped
    path = tmp_path / "sharegpt.json"
    path.write_text(json.dumps(data))
    out = tmp_path / "out"
    run = run_in_process(
        "--mock", "--mock-itl-ms", "1", *CHAT, "--multi-turn", "--dataset-name", "sharegpt",
        "--dataset-path", str(path), "--num-prompts", "3", "--multi-turn-max-turns", "3",
        "--workers", "2", "--save-result", "--result-dir", str(out),
    )  # fmt: skip
    assert run.returncode == 0, run.stderr[-2000:]
    figures = only_json(out)["loadgen"]["multi_turn"]
    assert figures["conversations"] == 3 and figures["completed"] == 3
    assert [t["completed"] for t in figures["per_turn"]] == [3, 3, 2]  # 3, 2 and 4 capped at 3
    tokens = [t["mean_input_tokens"] for t in figures["per_turn"]]
    assert tokens[0] < tokens[1] < tokens[2]  # each turn's prompt holds the conversation so far


@pytest.mark.parametrize("personality", ["vllm", "llamacpp", "sglang", "tgi"])
def test_later_turns_find_their_history_in_the_mocks_prefix_cache(personality: str) -> None:
    # Each turn resends the conversation so far, the server's answers as it streamed them (each
    # personality streams its own chunks): the mock's prefix cache (--prefill-us-per-token) finds
    # it. Prompts of a single-turn random run share nothing.
    args = [*CHAT, "--num-prompts", "4", "--random-input-len", "40", "--disable-tqdm"]
    prefix = ("--prefill-us-per-token", "1", "--personality", personality)
    multi = run_against_mock(
        *args, "--multi-turn", "--multi-turn-num-turns", "3", "--random-output-len", "20",
        mock_args=prefix,
    )  # fmt: skip
    assert multi.proc.returncode == 0, multi.proc.stderr[-2000:]
    cache = multi.stats["prefix_cache"]
    assert cache["queried_tokens"] == multi.stats["prompt_tokens"]
    # Turn k (k = 1, 2) resends turn k-1's prompt and answer: at least half of its prompt.
    assert cache["hit_tokens"] > 0.4 * cache["queried_tokens"]
    with mock_server(*prefix) as url:  # a fresh cache: the same seed's prompts as above
        single = run_in_process("--base-url", url, *args, "--random-output-len", "4")
        assert single.returncode == 0, single.stderr[-2000:]
        assert mock_stats(url)["prefix_cache"]["hit_tokens"] == 0
        # vLLM's counters on /metrics, no other server's
        metrics = urllib.request.urlopen(f"{url}/metrics", timeout=10).read().decode()
    assert ("vllm:prefix_cache_hits_total" in metrics) == (personality == "vllm")
