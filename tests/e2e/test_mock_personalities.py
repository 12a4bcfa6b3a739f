"""The mock server's personalities (--personality vllm|llamacpp|sglang|tgi|openai), run as real
subprocesses and driven over 127.0.0.1: chunk shapes, errors, tokenizer forms, /metrics, and
llama.cpp's connection habits (close after a stream, idle timeout, bounded handler pool)."""

# ruff: noqa: E501 (the expected streams are byte-exact event lines)
from __future__ import annotations

import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson
import pytest
from helpers import (
    MockProcess,
    hang_guard,
    mock_listening_port,
    spawn_mock,
    startups,
    stop_process,
)

PERSONALITIES = ("vllm", "llamacpp", "sglang", "tgi", "openai")
MODEL = "loadgen-mock"
AUTH = {"Authorization": "Bearer sk-test"}  # the openai personality requires a key


def start_all(tmp: Path, specs: dict[str, list[str]]) -> dict[str, MockProcess]:
    """Start one mock per spec at once (they load their tokenizers in parallel)."""
    procs = {
        name: spawn_mock("--port", "0", *args, stderr=tmp / f"{name}.err")
        for name, args in specs.items()
    }
    servers = {}
    try:
        for name, proc in procs.items():
            port = mock_listening_port(proc)
            servers[name] = MockProcess(proc, f"http://127.0.0.1:{port}", tmp / f"{name}.err")
    except BaseException:
        for proc in procs.values():
            proc.kill()
        raise
    return servers


@pytest.fixture(scope="module")
def servers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, MockProcess]]:
    specs = {p: ["--personality", p, "--output-len", "2"] for p in PERSONALITIES}
    specs |= {f"{p}-500": ["--personality", p, "--error-rate", "1"] for p in PERSONALITIES}
    specs["vllm-timed"] = ["--ttft-ms", "40", "--itl-ms", "5"]
    started = start_all(tmp_path_factory.mktemp("personalities"), specs)
    yield started
    for server in started.values():
        assert stop_process(server.proc) == 0


# --- a small HTTP/1.1 client on raw sockets, so that connection handling is visible ---


def connect(url: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return sock


def send(sock: socket.socket, method: str, path: str, body: Any = None, raw: bytes = b"") -> None:
    data = raw or (orjson.dumps(body) if body is not None else b"")
    head = f"{method} {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk-test\r\n"
    head += f"Content-Type: application/json\r\nContent-Length: {len(data)}\r\n\r\n"
    sock.sendall(head.encode() + data)


def receive(sock: socket.socket) -> tuple[int, dict[str, str], bytes]:
    """One response (Content-Length framed, as the mock always answers)."""
    buffer = b""
    while b"\r\n\r\n" not in buffer:
        chunk = sock.recv(65536)
        assert chunk, f"connection closed before a response: {buffer!r}"
        buffer += chunk
    head, body = buffer.split(b"\r\n\r\n", 1)
    lines = head.decode().split("\r\n")
    headers = {k.lower(): v.strip() for k, v in (line.split(":", 1) for line in lines[1:])}
    size = int(headers.get("content-length", 0))
    while len(body) < size:
        chunk = sock.recv(65536)
        assert chunk, "connection closed mid-body"
        body += chunk
    return int(lines[0].split()[1]), headers, body


def request(url: str, method: str, path: str, body: Any = None, raw: bytes = b"") -> Any:
    """(status, headers, body) of one request on a fresh connection."""
    with connect(url) as sock:
        send(sock, method, path, body, raw)
        return receive(sock)


def closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the peer closes the connection within ``seconds`` (nothing else arriving)."""
    sock.settimeout(seconds)
    try:
        return sock.recv(1) == b""
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


def stats(url: str) -> dict[str, Any]:
    return orjson.loads(request(url, "GET", "/mock/stats")[2])


def generation(chat: bool, stream: bool = True, usage: bool = True, **extra: Any) -> dict:
    body: dict[str, Any] = {"model": MODEL, "max_tokens": 2, "ignore_eos": True, **extra}
    if chat:
        body["messages"] = [{"role": "user", "content": "hi"}]
    else:
        body["prompt"] = "hi"
    if stream:
        body["stream"] = True
        if usage:
            body["stream_options"] = {"include_usage": True}
    return body


_VARYING = [
    (re.compile(rb'"id":"[^"]+"'), b'"id":"ID"'),
    (re.compile(rb'"created":\d+'), b'"created":T'),
    (re.compile(rb'"time_to_first_token_ms":[\d.]+'), b'"time_to_first_token_ms":TTFT'),
    (re.compile(rb'"obfuscation":"[^"]+"'), b'"obfuscation":"X"'),
]


def normalised(payload: bytes) -> list[str]:
    """The stream's events, ids, timestamps and measured times replaced by placeholders."""
    for pattern, placeholder in _VARYING:
        payload = pattern.sub(placeholder, payload)
    assert payload.endswith(b"\n\n")
    return [event.decode() for event in payload.split(b"\n\n")[:-1]]


# The exact events of a 2-token stream (" the", " in") of "hi" (2 prompt tokens with BOS; the
# chat prompt "user: hi\n" has 5), with include_usage, per personality.
V = '"id":"ID","object":"text_completion","created":T,"model":"loadgen-mock"'
VC = '"id":"ID","object":"chat.completion.chunk","created":T,"model":"loadgen-mock"'
L = '"created":T,"model":"loadgen-mock","system_fingerprint":"b0-unknown"'
LC = '"created":T,"id":"ID","model":"loadgen-mock","system_fingerprint":"b0-unknown"'
LT = ',"timings":{"cache_n":0,"prompt_n":%d,"prompt_ms":0.0,"prompt_per_token_ms":0.0,'
LT += '"prompt_per_second":null,"predicted_n":2,"predicted_ms":0.0,'
LT += '"predicted_per_token_ms":0.0,"predicted_per_second":null}'
LU = '"usage":{"completion_tokens":2,"prompt_tokens":%d,"total_tokens":%d,'
LU += '"prompt_tokens_details":{"cached_tokens":0}}'
T = '"object":"text_completion","id":"","created":T'
TC = '"object":"chat.completion.chunk","id":"","created":T,"model":"loadgen-mock"'
FP = '"system_fingerprint":"3.3.6-native"'
OA = '"id":"ID","object":"text_completion","created":T'
OC = VC + ',"service_tier":"default","system_fingerprint":"fp_mock"'
OU = '"usage":{"prompt_tokens":%d,"completion_tokens":2,"total_tokens":%d,'
OU += '"prompt_tokens_details":{"cached_tokens":0,"audio_tokens":0},"completion_tokens_details":'
OU += '{"reasoning_tokens":0,"audio_tokens":0,"accepted_prediction_tokens":0,'
OU += '"rejected_prediction_tokens":0}}'
DONE = "data: [DONE]"
STREAMS = {
    ("vllm", False): [
        f'data: {{{V},"choices":[{{"index":0,"text":" the","logprobs":null,"finish_reason":null,"stop_reason":null}}]}}',
        f'data: {{{V},"choices":[{{"index":0,"text":" in","logprobs":null,"finish_reason":"length","stop_reason":null}}]}}',
        f'data: {{{V},"choices":[],"usage":{{"prompt_tokens":2,"total_tokens":4,"completion_tokens":2}},"metrics":{{"queue_time_ms":0.0,"time_to_first_token_ms":TTFT}}}}',
        DONE,
    ],
    ("vllm", True): [
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null}}]}}',
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"content":" the"}},"logprobs":null,"finish_reason":null}}]}}',
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"content":" in"}},"logprobs":null,"finish_reason":"length","stop_reason":null}}]}}',
        f'data: {{{VC},"choices":[],"usage":{{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2}},"metrics":{{"queue_time_ms":0.0,"time_to_first_token_ms":TTFT}}}}',
        DONE,
    ],
    ("llamacpp", False): [
        f'data: {{"choices":[{{"text":" the","index":0,"logprobs":null,"finish_reason":null}}],{L},"object":"text_completion","id":"ID"}}',
        f'data: {{"choices":[{{"text":" in","index":0,"logprobs":null,"finish_reason":null}}],{L},"object":"text_completion","id":"ID"}}',
        f'data: {{"choices":[{{"text":"","index":0,"logprobs":null,"finish_reason":"length"}}],{L},"object":"text_completion",{LU % (2, 4)},"id":"ID"{LT % 2}}}',
        DONE,
    ],
    ("llamacpp", True): [
        f'data: {{"choices":[{{"finish_reason":null,"index":0,"delta":{{"role":"assistant","content":null}}}}],{LC},"object":"chat.completion.chunk"}}',
        f'data: {{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":" the"}}}}],{LC},"object":"chat.completion.chunk"}}',
        f'data: {{"choices":[{{"finish_reason":null,"index":0,"delta":{{"content":" in"}}}}],{LC},"object":"chat.completion.chunk"}}',
        f'data: {{"choices":[{{"finish_reason":"length","index":0,"delta":{{}}}}],{LC},"object":"chat.completion.chunk"}}',
        f'data: {{"choices":[],{LC},"object":"chat.completion.chunk",{LU % (5, 7)}{LT % 5}}}',
        DONE,
    ],
    ("sglang", False): [
        f'data: {{{V},"choices":[{{"index":0,"text":" the","logprobs":null,"finish_reason":null,"matched_stop":null}}],"usage":null}}',
        f'data: {{{V},"choices":[{{"index":0,"text":" in","logprobs":null,"finish_reason":"length","matched_stop":null}}],"usage":null}}',
        f'data: {{{V},"choices":[],"usage":{{"prompt_tokens":2,"total_tokens":4,"completion_tokens":2,"reasoning_tokens":0}}}}',
        DONE,
    ],
    ("sglang", True): [
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"role":"assistant","content":""}},"logprobs":null,"finish_reason":null,"matched_stop":null}}]}}',
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"content":" the"}},"logprobs":null,"finish_reason":null,"matched_stop":null}}]}}',
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{"content":" in"}},"logprobs":null,"finish_reason":null,"matched_stop":null}}]}}',
        f'data: {{{VC},"choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"length","matched_stop":null}}]}}',
        f'data: {{{VC},"choices":[],"usage":{{"prompt_tokens":5,"total_tokens":7,"completion_tokens":2,"prompt_tokens_details":null,"reasoning_tokens":0}}}}',
        DONE,
    ],
    ("tgi", False): [
        f'data:{{{T},"choices":[{{"index":0,"text":" the","logprobs":null,"finish_reason":""}}],"model":"loadgen-mock",{FP}}}',
        f'data:{{{T},"model":"loadgen-mock",{FP},"choices":[{{"index":0,"text":" in","logprobs":null,"finish_reason":"length"}}],"usage":{{"prompt_tokens":2,"completion_tokens":2,"total_tokens":4}}}}',
        "data:[DONE]",
    ],
    ("tgi", True): [
        f'data:{{{TC},{FP},"choices":[{{"index":0,"delta":{{"role":"assistant","content":" the"}},"logprobs":null,"finish_reason":null}}],"usage":null}}',
        f'data:{{{TC},{FP},"choices":[{{"index":0,"delta":{{"role":"assistant","content":" in"}},"logprobs":null,"finish_reason":"length"}}],"usage":null}}',
        f'data:{{{TC},{FP},"choices":[],"usage":{{"prompt_tokens":5,"completion_tokens":2,"total_tokens":7}}}}',
        "data:[DONE]",
    ],
    ("openai", False): [
        f'data: {{{OA},"choices":[{{"text":" the","index":0,"logprobs":null,"finish_reason":null}}],"model":"loadgen-mock","usage":null}}',
        f'data: {{{OA},"choices":[{{"text":" in","index":0,"logprobs":null,"finish_reason":null}}],"model":"loadgen-mock","usage":null}}',
        f'data: {{{OA},"choices":[{{"text":"","index":0,"logprobs":null,"finish_reason":"length"}}],"model":"loadgen-mock","usage":null}}',
        f'data: {{{OA},"choices":[],"model":"loadgen-mock",{OU % (2, 4)}}}',
        DONE,
    ],
    ("openai", True): [
        f'data: {{{OC},"choices":[{{"index":0,"delta":{{"role":"assistant","content":"","refusal":null}},"logprobs":null,"finish_reason":null}}],"usage":null,"obfuscation":"X"}}',
        f'data: {{{OC},"choices":[{{"index":0,"delta":{{"content":" the"}},"logprobs":null,"finish_reason":null}}],"usage":null,"obfuscation":"X"}}',
        f'data: {{{OC},"choices":[{{"index":0,"delta":{{"content":" in"}},"logprobs":null,"finish_reason":null}}],"usage":null,"obfuscation":"X"}}',
        f'data: {{{OC},"choices":[{{"index":0,"delta":{{}},"logprobs":null,"finish_reason":"length"}}],"usage":null,"obfuscation":"X"}}',
        f'data: {{{OC},"choices":[],{OU % (5, 7)},"obfuscation":"X"}}',
        DONE,
    ],
}  # fmt: skip


def path_of(chat: bool) -> str:
    return "/v1/chat/completions" if chat else "/v1/completions"


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_stream_with_usage_is_the_servers_exact_sequence(
    servers: dict[str, MockProcess], personality: str, chat: bool
) -> None:
    status, headers, body = request(
        servers[personality].url, "POST", path_of(chat), generation(chat)
    )
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    assert int(headers["content-length"]) == len(body)
    assert normalised(body) == STREAMS[personality, chat]


def without_usage(personality: str, chat: bool) -> list[str]:
    """The stream without include_usage: the usage-only chunk goes (llama.cpp's and TGI's
    completions carry usage on their last chunk anyway; OpenAI drops its "usage":null)."""
    events = [e for e in STREAMS[personality, chat] if '"choices":[],' not in e]
    if personality == "openai":
        events = [e.replace(',"usage":null', "") for e in events]
    return events


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_stream_without_usage(
    servers: dict[str, MockProcess], personality: str, chat: bool
) -> None:
    body = generation(chat, usage=False)
    payload = request(servers[personality].url, "POST", path_of(chat), body)[2]
    assert normalised(payload) == without_usage(personality, chat)


WHOLE_KEYS = {
    "vllm": ["id", "object", "created", "model", "choices", "usage"],
    "llamacpp": [
        "choices", "created", "model", "system_fingerprint", "object", "usage", "id", "timings",
    ],
    "sglang": ["id", "object", "created", "model", "choices", "usage", "metadata"],
    "tgi": ["object", "id", "created", "model", "system_fingerprint", "choices", "usage"],
    "openai": ["id", "object", "created", "model", "choices", "usage"],
}  # fmt: skip


@pytest.mark.parametrize("chat", [False, True], ids=["completions", "chat"])
@pytest.mark.parametrize("personality", PERSONALITIES)
def test_whole_response_in_the_servers_shape(
    servers: dict[str, MockProcess], personality: str, chat: bool
) -> None:
    status, headers, payload = request(
        servers[personality].url, "POST", path_of(chat), generation(chat, stream=False)
    )
    assert status == 200 and headers["content-type"] == "application/json"
    answer = orjson.loads(payload)
    keys = WHOLE_KEYS[personality] + (
        ["service_tier", "system_fingerprint"] if personality == "openai" and chat else []
    )
    assert list(answer) == keys
    choice = answer["choices"][0]
    text = choice["message"]["content"] if chat else choice["text"]
    assert (text, choice["finish_reason"]) == (" the in", "length")
    assert answer["usage"]["completion_tokens"] == 2
    assert answer["usage"]["prompt_tokens"] == (5 if chat else 2)
    assert answer["object"] == ("chat.completion" if chat else "text_completion")


def test_vllm_metrics_object_carries_the_measured_ttft(servers: dict[str, MockProcess]) -> None:
    url = servers["vllm-timed"].url
    for chat in (False, True):
        started = time.perf_counter()
        payload = request(url, "POST", path_of(chat), generation(chat))[2]
        elapsed_ms = (time.perf_counter() - started) * 1000
        usage_chunk = orjson.loads(payload.split(b"\n\n")[-3].removeprefix(b"data: "))
        metrics = usage_chunk["metrics"]
        assert metrics["queue_time_ms"] == 0.0
        assert isinstance(metrics["time_to_first_token_ms"], float)
        assert 39 <= metrics["time_to_first_token_ms"] < elapsed_ms


# --- errors ---

UNKNOWN_ROUTE = {
    "vllm": (404, b'{"detail":"Not Found"}'),
    "llamacpp": (
        404,
        b'{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}',
    ),
    "sglang": (404, b'{"detail":"Not Found"}'),
    "tgi": (404, b""),
    "openai": (
        404,
        b'{"error":{"message":"Invalid URL (POST /v1/nothing)","type":"invalid_request_error",'
        b'"param":null,"code":null}}',
    ),
}


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_unknown_route(servers: dict[str, MockProcess], personality: str) -> None:
    status, _, body = request(servers[personality].url, "POST", "/v1/nothing", {})
    assert (status, body) == UNKNOWN_ROUTE[personality]


def error_fields(personality: str, body: bytes) -> tuple[Any, ...]:
    """The (type, code) pair of an error body, after checking its shape."""
    error = orjson.loads(body)
    if personality == "tgi":
        assert list(error) == ["error", "error_type"]
        return error["error_type"], None
    if personality == "sglang":
        assert list(error) == ["object", "message", "type", "param", "code"]
        return error["type"], error["code"]
    assert list(error) == ["error"]
    inner = error["error"]
    order = ["code", "message", "type"] if personality == "llamacpp" else None
    assert list(inner) == (order or ["message", "type", "param", "code"])
    return inner["type"], inner["code"]


BAD_BODY = {  # a body that is not JSON
    "vllm": (400, ("BadRequestError", 400)),
    "llamacpp": (500, ("server_error", 500)),
    "sglang": (400, ("BadRequestError", 400)),
    "openai": (400, ("invalid_request_error", None)),
}
INJECTED = {  # --error-rate 1
    "vllm": ("InternalServerError", 500),
    "llamacpp": ("server_error", 500),
    "sglang": ("InternalServerError", 500),
    "tgi": ("incomplete_generation", None),
    "openai": ("server_error", None),
}


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_bad_body_and_injected_errors(servers: dict[str, MockProcess], personality: str) -> None:
    url = servers[personality].url
    status, headers, body = request(url, "POST", "/v1/completions", raw=b"{nope")
    if personality == "tgi":  # axum's JSON rejection: plain text
        assert status == 400 and headers["content-type"] == "text/plain"
        assert body.startswith(b"Failed to parse the request body as JSON")
    else:
        expected_status, fields = BAD_BODY[personality]
        assert status == expected_status and error_fields(personality, body) == fields
    for chat in (False, True):
        for stream in (False, True):
            body_json = generation(chat, stream=stream)
            status, _, body = request(
                servers[f"{personality}-500"].url, "POST", path_of(chat), body_json
            )
            assert status == 500 and error_fields(personality, body) == INJECTED[personality]


def test_validation_errors_in_each_shape(servers: dict[str, MockProcess]) -> None:
    too_long = generation(False, max_tokens=10**6)
    got = {p: request(servers[p].url, "POST", "/v1/completions", too_long) for p in PERSONALITIES}
    assert {p: status for p, (status, _, _) in got.items()} == {
        "vllm": 400, "llamacpp": 400, "sglang": 400, "tgi": 422, "openai": 400,
    }  # fmt: skip
    assert error_fields("tgi", got["tgi"][2]) == ("validation", None)
    assert error_fields("llamacpp", got["llamacpp"][2]) == ("invalid_request_error", 400)


def test_model_field(servers: dict[str, MockProcess]) -> None:
    other = generation(False, stream=False, model="some-other-model")
    answers = {p: request(servers[p].url, "POST", "/v1/completions", other) for p in PERSONALITIES}
    assert answers["vllm"][0] == 404
    assert error_fields("vllm", answers["vllm"][2]) == ("NotFoundError", 404)
    assert answers["openai"][0] == 404
    assert orjson.loads(answers["openai"][2])["error"]["code"] == "model_not_found"
    for personality in ("llamacpp", "sglang", "tgi"):  # any name is answered
        assert answers[personality][0] == 200
    assert orjson.loads(answers["sglang"][2])["model"] == "some-other-model"  # echoed
    assert orjson.loads(answers["tgi"][2])["model"] == MODEL  # completions: the server's id
    assert orjson.loads(answers["llamacpp"][2])["model"] == MODEL


def test_openai_wants_an_api_key(servers: dict[str, MockProcess]) -> None:
    url = servers["openai"].url
    with connect(url) as sock:
        sock.sendall(b"GET /v1/models HTTP/1.1\r\nHost: x\r\n\r\n")
        status, _, body = receive(sock)
    assert status == 401 and error_fields("openai", body) == ("invalid_request_error", None)


# --- tokenizer endpoints ---


def test_tokenizer_forms(servers: dict[str, MockProcess], raw_tok: Any) -> None:
    ids = raw_tok.encode("hello world", add_special_tokens=False).ids
    with_bos = raw_tok.encode("hello world").ids
    vllm, llama = servers["vllm"].url, servers["llamacpp"].url
    answer = orjson.loads(request(vllm, "POST", "/tokenize", {"prompt": "hello world"})[2])
    assert answer == {
        "count": len(with_bos), "max_model_len": 131072, "tokens": with_bos, "token_strs": None,
    }  # fmt: skip
    assert orjson.loads(request(vllm, "POST", "/detokenize", {"tokens": ids})[2]) == {
        "prompt": "hello world"
    }

    body = {"content": "hello world", "add_special": False}
    assert orjson.loads(request(llama, "POST", "/tokenize", body)[2]) == {"tokens": ids}
    assert orjson.loads(request(llama, "POST", "/tokenize", {"prompt": "hello"})[2]) == {
        "tokens": []
    }
    assert orjson.loads(request(llama, "POST", "/detokenize", {"tokens": ids})[2]) == {
        "content": "hello world"
    }
    status, _, body = request(llama, "POST", "/detokenize", {"tokens": [10**9]})
    assert status == 500 and error_fields("llamacpp", body)[0] == "server_error"

    sglang = servers["sglang"].url
    for prefix in ("", "/v1"):
        answer = orjson.loads(request(sglang, "POST", f"{prefix}/tokenize", {"prompt": "hi"})[2])
        assert list(answer) == ["tokens", "count", "max_model_len"]
        assert orjson.loads(
            request(sglang, "POST", f"{prefix}/detokenize", {"tokens": ids})[2]
        ) == {"text": "hello world"}

    tgi = servers["tgi"].url
    answer = orjson.loads(request(tgi, "POST", "/tokenize", {"inputs": "hello world"})[2])
    assert [t["id"] for t in answer] == with_bos
    assert "".join(t["text"] for t in answer) == "hello world"
    assert list(answer[-1]) == ["id", "text", "start", "stop"] and answer[-1]["stop"] == 11
    assert request(tgi, "POST", "/detokenize", {"tokens": ids})[:3:2] == (404, b"")
    assert request(servers["openai"].url, "POST", "/tokenize", {"prompt": "x"})[0] == 404


# --- /metrics and /mock/stats ---

METRICS = {
    "vllm": ("vllm:prompt_tokens_total", "vllm:generation_tokens_total", "vllm:num_requests_running"),
    "llamacpp": (
        "llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total",
        "llamacpp:requests_processing",
    ),
    "sglang": (
        "sglang:prompt_tokens_total", "sglang:generation_tokens_total", "sglang:num_running_reqs",
    ),
    "tgi": ("tgi_request_input_length_sum", "tgi_request_generated_tokens_sum", "tgi_batch_current_size"),
}  # fmt: skip


def metric(text: str, name: str) -> float:
    match = re.search(rf"^{re.escape(name)}(?:{{[^}}]*}})? (\S+)$", text, re.MULTILINE)
    assert match, f"{name} missing from /metrics"
    return float(match.group(1))


@pytest.mark.parametrize("personality", METRICS)
def test_metrics_counters_equal_the_usage_answered(
    servers: dict[str, MockProcess], personality: str
) -> None:
    url = servers[personality].url
    prompt_name, generated_name, running_name = METRICS[personality]
    before = request(url, "GET", "/metrics")[2].decode()
    usage = [0, 0]
    for chat in (False, True):
        body = generation(chat, stream=False, max_tokens=3)
        answer = orjson.loads(request(url, "POST", path_of(chat), body)[2])
        usage[0] += answer["usage"]["prompt_tokens"]
        usage[1] += answer["usage"]["completion_tokens"]
    after = request(url, "GET", "/metrics")[2].decode()
    assert metric(after, prompt_name) - metric(before, prompt_name) == usage[0]
    assert metric(after, generated_name) - metric(before, generated_name) == usage[1] == 6
    assert metric(after, running_name) == 0
    counts = stats(url)
    assert (counts["prompt_tokens"], counts["completion_tokens"]) == (
        metric(after, prompt_name),
        metric(after, generated_name),
    )


def test_openai_has_no_metrics(servers: dict[str, MockProcess]) -> None:
    assert request(servers["openai"].url, "GET", "/metrics")[0] == 404


# --- llama.cpp's connection habits ---


def test_llamacpp_closes_the_connection_after_each_stream(servers: dict[str, MockProcess]) -> None:
    url = servers["llamacpp"].url
    before = stats(url)["connections"]
    with connect(url) as sock:
        send(sock, "POST", "/v1/completions", generation(False))
        status, headers, _ = receive(sock)
        assert status == 200
        assert headers["connection"] == "keep-alive"
        assert headers["keep-alive"] == "timeout=5, max=100"
        assert closed_within(sock, 2.0)
    # A whole (non-streamed) answer keeps the connection, which serves the next request.
    with connect(url) as sock:
        for _ in range(2):
            send(sock, "POST", "/v1/completions", generation(False, stream=False))
            assert receive(sock)[0] == 200
        assert not closed_within(sock, 0.1)
    after = stats(url)["connections"]
    assert after["closed_after_response"] - before["closed_after_response"] == 1


def test_llamacpp_never_sees_a_request_sent_right_after_a_stream(
    servers: dict[str, MockProcess],
) -> None:
    url = servers["llamacpp"].url
    seen = sum(stats(url)["requests"].values())
    with connect(url) as sock:
        send(sock, "POST", "/v1/chat/completions", generation(True))
        assert receive(sock)[0] == 200
        send(sock, "POST", "/v1/chat/completions", generation(True))  # the pooled reuse
        assert closed_within(sock, 2.0)  # no answer: the connection goes
    assert sum(stats(url)["requests"].values()) == seen + 1  # /mock/stats is not counted


def test_llamacpp_startup_answers_503_then_serves(tmp_path: Path) -> None:
    server = start_all(tmp_path, {"l": ["--personality", "llamacpp", "--startup-delay", "0.8"]})[
        "l"
    ]
    loading = b'{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}'
    try:
        for method, path, body in (
            ("GET", "/health", None),
            ("GET", "/v1/models", None),
            ("POST", "/v1/completions", generation(False)),
            ("POST", "/tokenize", {"content": "x"}),
        ):
            status, _, answer = request(server.url, method, path, body)
            assert (status, answer) == (503, loading)
        time.sleep(0.9)
        assert request(server.url, "GET", "/health")[0] == 200
        assert request(server.url, "POST", "/v1/completions", generation(False))[0] == 200
    finally:
        assert stop_process(server.proc) == 0


def test_llamacpp_handler_pool_and_idle_timeout(tmp_path: Path) -> None:
    # The idle timeout, two start-ups of the CLI on this machine (at least 0.6 s): a quarter of
    # it is "at once", and what the idle timeout would free comes later than that.
    keepalive_s = max(0.6, startups(2))
    args = ["--personality", "llamacpp", "--http-threads", "2",
            "--keepalive-timeout", f"{keepalive_s:.2f}"]  # fmt: skip
    server = start_all(tmp_path, {"l": args})["l"]
    try:
        first, second, third = connect(server.url), connect(server.url), connect(server.url)
        time.sleep(0.05)
        send(third, "POST", "/v1/completions", generation(False, stream=False))
        third.settimeout(keepalive_s / 4)
        with pytest.raises(TimeoutError):  # both handlers are held by idle connections
            third.recv(1)
        first.close()  # frees a handler: the third connection is served at once
        third.settimeout(hang_guard(2))
        started = time.monotonic()
        status, headers, _ = receive(third)
        assert status == 200 and time.monotonic() - started < keepalive_s / 4
        assert headers["keep-alive"] == f"timeout={max(round(keepalive_s), 1)}, max=100"
        # The idle timeout closes connections that hold a handler without a request.
        assert closed_within(second, hang_guard(keepalive_s))
        assert closed_within(third, hang_guard(keepalive_s))
        counts = stats(server.url)["connections"]
        assert counts["waited_for_handler"] == 1 and counts["accepted"] >= 3
        assert stats(server.url)["requests_served"] >= 1
    finally:
        assert stop_process(server.proc) == 0


def test_keepalive_timeout_defaults_to_the_personalitys(servers: dict[str, MockProcess]) -> None:
    # llama.cpp advertises its idle timeout; left at its default, it is the personality's 5 s.
    headers = request(servers["llamacpp"].url, "GET", "/health")[1]
    assert headers["keep-alive"] == "timeout=5, max=100"
    assert stats(servers["tgi"].url)["personality"] == "tgi"
