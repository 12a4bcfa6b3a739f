"""The mock server, run as a real subprocess and driven with aiohttp over 127.0.0.1."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import time
from pathlib import Path
from typing import Any

import aiohttp
import orjson
import pytest
from helpers import (
    MockProcess,
    free_port,
    hang_guard,
    mock_listening_port,
    spawn_mock,
    start_mock,
    stop_process,
)

from loadgen.mock.bodies import render_chat
from loadgen.text.tokenizer import MOCK_MODEL_NAME

OUTPUT_LEN = 16
MAX_MODEL_LEN = 4096


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory):
    srv = start_mock(
        tmp_path_factory.mktemp("plain"),
        *("--output-len", str(OUTPUT_LEN), "--max-model-len", str(MAX_MODEL_LEN)),
    )
    yield srv
    assert stop_process(srv.proc, signal.SIGINT) == 0


@pytest.fixture(scope="module")
def timed_server(tmp_path_factory: pytest.TempPathFactory):
    srv = start_mock(tmp_path_factory.mktemp("timed"), "--ttft-ms", "100", "--itl-ms", "20")
    yield srv
    assert stop_process(srv.proc) == 0


async def _request(
    method: str, url: str, body: Any = None, raw: bytes | None = None
) -> tuple[int, str, bytes]:
    data = raw if raw is not None else (orjson.dumps(body) if body is not None else None)
    async with (
        aiohttp.ClientSession() as session,
        session.request(method, url, data=data) as resp,
    ):
        return resp.status, resp.content_type, await resp.read()


def post(url: str, body: Any = None, raw: bytes | None = None) -> tuple[int, str, bytes]:
    return asyncio.run(_request("POST", url, body, raw))


def get(url: str) -> tuple[int, str, bytes]:
    return asyncio.run(_request("GET", url))


def sse_events(payload: bytes) -> list[Any]:
    """Each event's JSON, with the closing [DONE] as the string "[DONE]"."""
    assert payload.endswith(b"\n\n")
    events = []
    for message in payload.split(b"\n\n")[:-1]:
        assert message.startswith(b"data: "), message
        data = message[len(b"data: ") :]
        events.append("[DONE]" if data == b"[DONE]" else orjson.loads(data))
    return events


def completion(prompt: Any, **extra: Any) -> dict[str, Any]:
    return {"model": MOCK_MODEL_NAME, "prompt": prompt, **extra}


STREAM = {"stream": True, "stream_options": {"include_usage": True}}


def test_health_and_models(server: MockProcess) -> None:
    status, _, body = get(server.url + "/health")
    assert (status, body) == (200, b"")
    status, ctype, body = get(server.url + "/v1/models")
    assert (status, ctype) == (200, "application/json")
    models = orjson.loads(body)
    assert models["object"] == "list"
    [entry] = models["data"]
    assert isinstance(entry.pop("created"), int)
    assert entry == {
        "id": MOCK_MODEL_NAME,
        "object": "model",
        "owned_by": "loadgen",
        "root": MOCK_MODEL_NAME,
        "parent": None,
        "max_model_len": MAX_MODEL_LEN,
    }


def test_streaming_completions_with_usage(server: MockProcess, raw_tok) -> None:
    prompt = "The quick brown fox jumps over the lazy dog."
    body = completion(prompt, max_tokens=40, ignore_eos=True, **STREAM)
    status, ctype, payload = post(server.url + "/v1/completions", body)
    assert (status, ctype) == (200, "text/event-stream")
    *chunks, usage_chunk, done = sse_events(payload)
    assert done == "[DONE]"
    assert len(chunks) == 40
    assert all(c["object"] == "text_completion" and len(c["choices"]) == 1 for c in chunks)
    assert len({c["id"] for c in chunks}) == 1 and chunks[0]["id"].startswith("cmpl-")
    finish = [c["choices"][0]["finish_reason"] for c in chunks]
    assert finish == [None] * 39 + ["length"]
    text = "".join(c["choices"][0]["text"] for c in chunks)
    # Each event is one ordinary token, so the text re-encodes to the same count.
    assert len(raw_tok.encode(text, add_special_tokens=False).ids) == 40
    assert usage_chunk["choices"] == []
    prompt_tokens = len(raw_tok.encode(prompt).ids)
    assert usage_chunk["usage"] == {
        "prompt_tokens": prompt_tokens,
        "total_tokens": prompt_tokens + 40,
        "completion_tokens": 40,
    }


def test_streaming_without_usage_and_token_id_prompt(server: MockProcess) -> None:
    body = completion([5, 6, 7, 8], max_tokens=3, ignore_eos=True, stream=True)
    *chunks, done = sse_events(post(server.url + "/v1/completions", body)[2])
    assert done == "[DONE]"
    assert [len(c["choices"]) for c in chunks] == [1, 1, 1]

    body = completion([5, 6, 7, 8], max_tokens=3, ignore_eos=True, **STREAM)
    usage = sse_events(post(server.url + "/v1/completions", body)[2])[-2]["usage"]
    assert usage["prompt_tokens"] == 4


def test_chat_streaming_role_first(server: MockProcess, raw_tok) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": [{"type": "text", "text": "Hello there"}]},
    ]
    body = {
        "model": MOCK_MODEL_NAME,
        "messages": messages,
        "max_completion_tokens": 5,
        "ignore_eos": True,
        **STREAM,
    }
    *chunks, usage_chunk, done = sse_events(post(server.url + "/v1/chat/completions", body)[2])
    assert done == "[DONE]"
    assert all(c["object"] == "chat.completion.chunk" for c in [*chunks, usage_chunk])
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert chunks[0]["id"].startswith("chatcmpl-")
    tokens = chunks[1:]
    assert len(tokens) == 5
    assert all(set(c["choices"][0]["delta"]) == {"content"} for c in tokens)
    assert [c["choices"][0]["finish_reason"] for c in tokens] == [None] * 4 + ["length"]
    assert usage_chunk["choices"] == []
    prompt_tokens = len(raw_tok.encode(render_chat(messages)).ids)
    assert usage_chunk["usage"]["prompt_tokens"] == prompt_tokens
    assert usage_chunk["usage"]["completion_tokens"] == 5


def test_non_streaming(server: MockProcess, raw_tok) -> None:
    status, ctype, payload = post(
        server.url + "/v1/completions", completion("Hi", max_tokens=7, ignore_eos=True)
    )
    assert (status, ctype) == (200, "application/json")
    response = orjson.loads(payload)
    assert response["object"] == "text_completion"
    [choice] = response["choices"]
    assert choice["finish_reason"] == "length"
    assert len(raw_tok.encode(choice["text"], add_special_tokens=False).ids) == 7
    assert response["usage"]["prompt_tokens"] == len(raw_tok.encode("Hi").ids)
    assert response["usage"]["completion_tokens"] == 7

    chat = {"model": MOCK_MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}]}
    response = orjson.loads(post(server.url + "/v1/chat/completions", chat)[2])
    assert response["object"] == "chat.completion"
    [choice] = response["choices"]
    assert choice["message"]["role"] == "assistant"
    assert choice["finish_reason"] == "stop"
    assert response["usage"]["completion_tokens"] == OUTPUT_LEN


@pytest.mark.parametrize(
    ("limits", "expected"),
    [
        ({"max_completion_tokens": 3}, (3, "length")),
        ({"max_completion_tokens": 3, "max_tokens": 9}, (3, "length")),
        ({"max_tokens": 9}, (9, "length")),
        ({"max_tokens": 100}, (OUTPUT_LEN, "stop")),
        ({"max_tokens": 100, "min_tokens": 24}, (24, "stop")),
        ({"max_tokens": 20, "min_tokens": 20}, (20, "stop")),
        ({"max_tokens": 100, "ignore_eos": True}, (100, "length")),
        ({}, (OUTPUT_LEN, "stop")),
    ],
)
def test_output_length(server: MockProcess, limits: dict[str, Any], expected: tuple) -> None:
    body = {"model": MOCK_MODEL_NAME, "messages": [{"role": "user", "content": "x"}], **limits}
    events = sse_events(post(server.url + "/v1/chat/completions", body | STREAM)[2])
    tokens = [e for e in events[1:] if e != "[DONE]" and e["choices"]]
    assert (len(tokens), tokens[-1]["choices"][0]["finish_reason"]) == expected
    assert events[-2]["usage"]["completion_tokens"] == expected[0]


def test_tokenize_detokenize(server: MockProcess, raw_tok) -> None:
    text = "Tokenize me, please: ünïcode too."
    status, _, payload = post(server.url + "/tokenize", {"model": MOCK_MODEL_NAME, "prompt": text})
    assert status == 200
    result = orjson.loads(payload)
    assert result == {
        "count": len(raw_tok.encode(text).ids),
        "max_model_len": MAX_MODEL_LEN,
        "tokens": raw_tok.encode(text).ids,
        "token_strs": None,
    }
    result = orjson.loads(
        post(server.url + "/tokenize", {"prompt": text, "add_special_tokens": False})[2]
    )
    assert result["tokens"] == raw_tok.encode(text, add_special_tokens=False).ids

    detok = orjson.loads(post(server.url + "/detokenize", {"tokens": result["tokens"]})[2])
    assert detok == {"prompt": text}
    with_bos = orjson.loads(post(server.url + "/detokenize", {"tokens": [0, *result["tokens"]]})[2])
    assert with_bos == {"prompt": "<|begin_of_text|>" + text}

    llama = orjson.loads(post(server.url + "/tokenize", {"content": text})[2])
    assert llama == {"tokens": raw_tok.encode(text, add_special_tokens=False).ids}

    messages = [{"role": "user", "content": "Hi"}]
    chat = orjson.loads(post(server.url + "/tokenize", {"messages": messages})[2])
    assert chat["count"] == len(raw_tok.encode(render_chat(messages)).ids)


@pytest.mark.parametrize(
    ("path", "raw", "status", "message"),
    [
        ("/v1/completions", b"{not json", 400, "Invalid JSON"),
        ("/v1/completions", b"[1, 2]", 400, "JSON object"),
        ("/v1/completions", b'{"model": "other", "prompt": "x"}', 404, "The model `other`"),
        ("/v1/completions", b'{"prompt": "x"}', 404, "does not exist"),
        ("/v1/chat/completions", b'{"model": "gpt", "messages": []}', 404, "`gpt` does not"),
        (
            "/v1/completions",
            b'{"model": "loadgen-mock", "prompt": "x", "max_tokens": -1}',
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            b'{"model": "loadgen-mock", "prompt": "x", "max_tokens": "9"}',
            400,
            "max_tokens",
        ),
        (
            "/v1/completions",
            b'{"model": "loadgen-mock", "prompt": "x", "max_tokens": 5000}',
            400,
            "maximum context length",
        ),
        ("/v1/completions", b'{"model": "loadgen-mock", "prompt": 3}', 400, "prompt"),
        ("/v1/completions", b'{"model": "loadgen-mock", "prompt": [1, "a"]}', 400, "token id"),
        ("/v1/chat/completions", b'{"model": "loadgen-mock", "messages": "hi"}', 400, "messages"),
        ("/tokenize", b"{nope", 400, "Invalid JSON"),
        ("/tokenize", b'{"prompt": 5}', 400, "tokenize"),
        ("/detokenize", b'{"tokens": "abc"}', 400, "tokens"),
        ("/detokenize", b'{"tokens": [99999999]}', 400, "token ids"),
    ],
)
def test_errors(server: MockProcess, path: str, raw: bytes, status: int, message: str) -> None:
    got_status, ctype, payload = post(server.url + path, raw=raw)
    assert (got_status, ctype) == (status, "application/json")
    error = orjson.loads(payload)["error"]  # vLLM's ErrorResponse: {"error": ErrorInfo}
    assert error["code"] == status and error["param"] is None
    assert error["type"] == {400: "BadRequestError", 404: "NotFoundError"}[status]
    assert message in error["message"]


def test_latency(timed_server: MockProcess, server: MockProcess) -> None:
    async def run(url: str) -> tuple[float, float, int]:
        body = completion("x", max_tokens=6, ignore_eos=True, stream=True)
        async with aiohttp.ClientSession() as session:
            start = time.perf_counter()
            async with session.post(url + "/v1/completions", json=body) as resp:
                first = None
                payload = b""
                async for chunk in resp.content.iter_any():
                    first = first or time.perf_counter()
                    payload += chunk
            assert first is not None
            return first - start, time.perf_counter() - start, len(sse_events(payload))

    ttft, total, n_events = asyncio.run(run(timed_server.url))
    _, untimed_s, _ = asyncio.run(run(server.url))  # the same request without the delays, now
    assert n_events == 7  # 6 tokens and [DONE]
    # Never early; and each delay is paid once: under twice the delays plus the untimed
    # request's own time on this machine.
    assert 0.095 <= ttft < 2 * 0.1 + untimed_s, (ttft, untimed_s)
    assert 0.095 + 5 * 0.02 <= total < 2 * (0.1 + 5 * 0.02) + untimed_s, (total, untimed_s)


def test_paced_streams_reuse_the_connection(timed_server: MockProcess, server: MockProcess) -> None:
    async def run() -> tuple[list[bytes], list[bytes], int]:
        created = 0

        async def on_create(*_: Any) -> None:
            nonlocal created
            created += 1

        trace = aiohttp.TraceConfig()
        trace.on_connection_create_end.append(on_create)
        connector = aiohttp.TCPConnector(limit=1)
        paced, whole = [], []
        async with aiohttp.ClientSession(connector=connector, trace_configs=[trace]) as session:
            chat = {"model": MOCK_MODEL_NAME, "messages": [{"role": "user", "content": "x"}]}
            for path, body in (
                ("/v1/completions", completion("x")),
                ("/v1/chat/completions", chat),
                ("/v1/completions", completion("x")),
            ):
                body |= {"max_tokens": 4, "ignore_eos": True, **STREAM}
                async with session.post(timed_server.url + path, json=body) as resp:
                    paced.append(await resp.read())
                    assert int(resp.headers["Content-Length"]) == len(paced[-1])
                async with session.post(server.url + path, json=body) as resp:
                    whole.append(await resp.read())
        return paced, whole, created

    paced, whole, created = asyncio.run(run())
    assert created == 2  # one connection per server, each reused for all three streams
    for paced_body, whole_body in zip(paced, whole, strict=True):
        # Paced or sent in one write, the events are the same but for the ids and timestamps.
        assert len(sse_events(paced_body)) == len(sse_events(whole_body))
        strip = re.compile(rb'"id":"[^"]*","object":"([^"]*)","created":\d+|_ms":[\d.]+')
        assert strip.sub(rb"\1", paced_body) == strip.sub(rb"\1", whole_body)


def test_client_disconnect_mid_stream(timed_server: MockProcess) -> None:
    async def run() -> None:
        body = completion("x", max_tokens=500, ignore_eos=True, stream=True)
        async with aiohttp.ClientSession() as session:
            resp = await session.post(timed_server.url + "/v1/completions", json=body)
            await resp.content.readuntil(b"\n\n")
            resp.close()  # drops the connection mid-stream
        await asyncio.sleep(0.1)  # the server's next write hits the closed connection

    asyncio.run(run())
    assert get(timed_server.url + "/health")[0] == 200
    assert timed_server.proc.poll() is None
    assert "Traceback" not in timed_server.stderr.read_text()


def test_startup_delay_and_error_rate(tmp_path: Path) -> None:
    delay = 1.0
    port = free_port()
    started = time.monotonic()
    proc = spawn_mock(
        *("--port", str(port), "--startup-delay", str(delay), "--error-rate", "1.0"),
        stderr=tmp_path / "stderr.txt",
    )
    try:
        refused = 0
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except ConnectionRefusedError:
                refused += 1
                assert time.monotonic() - started < hang_guard(20), "the port never opened"
                time.sleep(0.02)
        opened = time.monotonic() - started
        assert opened >= delay
        assert refused > 10
        assert mock_listening_port(proc, timeout=5) == port  # within hang_guard(5)

        url = f"http://127.0.0.1:{port}"
        for body in (completion("x", max_tokens=2, stream=True), completion("x", max_tokens=2)):
            status, ctype, payload = post(url + "/v1/completions", body)
            assert (status, ctype) == (500, "application/json")
            error = orjson.loads(payload)["error"]
            assert error["code"] == 500
            assert error["type"] == "InternalServerError"
        chat = {"model": MOCK_MODEL_NAME, "messages": [{"role": "user", "content": "x"}]}
        assert post(url + "/v1/chat/completions", chat)[0] == 500
        assert get(url + "/health")[0] == 200  # only generation requests fail
    finally:
        returncode = stop_process(proc)
    assert returncode == 0


async def _post_with_headers(url: str, body: Any) -> tuple[int, dict[str, str], bytes]:
    async with aiohttp.ClientSession() as session, session.post(url, json=body) as resp:
        return resp.status, dict(resp.headers), await resp.read()


def test_embeddings_and_pooling(server: MockProcess, raw_tok) -> None:
    texts = ["Hi", "the cat sat"]
    counts = [len(raw_tok.encode(t).ids) for t in texts]
    body = {"model": MOCK_MODEL_NAME, "input": texts}
    status, ctype, payload = post(server.url + "/v1/embeddings", body)
    assert (status, ctype) == (200, "application/json")
    answer = orjson.loads(payload)
    assert answer["object"] == "list" and answer["id"].startswith("embd-")
    assert [d["index"] for d in answer["data"]] == [0, 1]
    vector = answer["data"][0]["embedding"]
    assert len(vector) == 384 and abs(sum(x * x for x in vector) - 1) < 1e-9
    assert answer["usage"]["prompt_tokens"] == sum(counts)
    # /pooling names the vector "data"; one string input is one vector.
    pooled = orjson.loads(post(server.url + "/pooling", {**body, "input": "Hi"})[2])
    assert len(pooled["data"]) == 1 and len(pooled["data"][0]["data"]) == 384
    assert pooled["usage"]["prompt_tokens"] == counts[0]
    chat = {"model": MOCK_MODEL_NAME, "messages": [{"role": "user", "content": "Hi"}]}
    usage = orjson.loads(post(server.url + "/v1/embeddings", chat)[2])["usage"]
    assert usage["prompt_tokens"] == len(raw_tok.encode(render_chat(chat["messages"])).ids)
    # encoding_format bytes: raw float32, usage in the metadata header; bytes_only: no usage.
    status, headers, raw = asyncio.run(
        _post_with_headers(server.url + "/v1/embeddings", {**body, "encoding_format": "bytes"})
    )
    assert (status, len(raw)) == (200, 2 * 384 * 4)
    assert orjson.loads(headers["metadata"])["usage"]["prompt_tokens"] == sum(counts)
    status, headers, raw = asyncio.run(
        _post_with_headers(server.url + "/pooling", {**body, "encoding_format": "bytes_only"})
    )
    assert (status, len(raw), "metadata" in headers) == (200, 2 * 384 * 4, False)
    bad = post(server.url + "/v1/embeddings", {**body, "encoding_format": "base64"})
    assert bad[0] == 400


def test_rerank(server: MockProcess, raw_tok) -> None:
    query, docs = "the cat", ["a mat", "sat on it", "x"]
    for path in ("/rerank", "/v1/rerank", "/v2/rerank"):
        status, _, payload = post(
            server.url + path, {"model": MOCK_MODEL_NAME, "query": query, "documents": docs}
        )
        assert status == 200
        answer = orjson.loads(payload)
        assert [r["index"] for r in answer["results"]] == [0, 1, 2]
        assert [r["document"]["text"] for r in answer["results"]] == docs
        scores = [r["relevance_score"] for r in answer["results"]]
        assert scores == sorted(scores, reverse=True)
        pairs = sum(len(raw_tok.encode(query).ids) + len(raw_tok.encode(d).ids) for d in docs)
        assert answer["usage"] == {"prompt_tokens": pairs, "total_tokens": pairs}
    status, _, payload = post(server.url + "/rerank", {"model": MOCK_MODEL_NAME, "query": "q"})
    assert status == 400 and b"documents must be a non-empty list" in payload
