"""Start-up against in-process aiohttp servers on 127.0.0.1: the server tokenizer in llama.cpp's
/tokenize form, and model discovery's headers and fallback."""

from __future__ import annotations

import asyncio

from aiohttp import web
from helpers import server_tokenizer_round_trip

from loadgen.server.client import ServerClient, auth_headers
from loadgen.server.discovery import fetch_first_model
from loadgen.server.tokenizer import LLAMA_CPP_FORM, ServerTokenizer
from loadgen.text.tokenizer import load_tokenizer


def llama_cpp_app() -> web.Application:
    """/tokenize and /detokenize as llama.cpp's server answers them (over the mock's tokenizer)."""
    tokenizer = load_tokenizer("loadgen-mock")
    vocab = tokenizer.get_vocab_size()

    async def tokenize(request: web.Request) -> web.Response:
        body = await request.json()
        if "content" not in body:
            return web.json_response({"tokens": []})  # llama.cpp's answer to vLLM's form
        ids = tokenizer.encode(body["content"], add_special_tokens=body.get("add_special", False))
        return web.json_response({"tokens": ids.ids})

    async def detokenize(request: web.Request) -> web.Response:
        tokens = (await request.json())["tokens"]
        if any(t >= vocab for t in tokens):
            return web.json_response({"error": {"message": "invalid token"}}, status=500)
        return web.json_response({"content": tokenizer.decode(tokens, skip_special_tokens=False)})

    app = web.Application()
    app.router.add_post("/tokenize", tokenize)
    app.router.add_post("/detokenize", detokenize)
    return app


def test_server_tokenizer_in_llama_cpp_form() -> None:
    async def run() -> tuple[ServerTokenizer, list[list[int]], list[str]]:
        runner = web.AppRunner(llama_cpp_app())
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            port = runner.addresses[0][1]
            return await server_tokenizer_round_trip(f"http://127.0.0.1:{port}")
        finally:
            await runner.cleanup()

    tokenizer, ids, decoded = asyncio.run(run())
    assert tokenizer.form == LLAMA_CPP_FORM
    assert tokenizer.vocab_size == 8192
    assert tokenizer.num_special_tokens == 1
    assert decoded[1] == "Another prompt"
    assert len(ids) == 3 and all(ids)


def test_model_discovery_sends_the_headers_and_falls_back_to_the_id(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    seen: list[dict[str, str]] = []

    async def models(request: web.Request) -> web.Response:
        seen.append(dict(request.headers))
        return web.json_response({"data": [{"id": "served-name", "root": None}, {"id": "other"}]})

    async def run() -> tuple[str, str]:
        app = web.Application()
        app.router.add_get("/v1/models", models)
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        client = ServerClient(
            f"http://127.0.0.1:{runner.addresses[0][1]}", auth_headers({"x-team": "bench"})
        )
        try:
            return await fetch_first_model(client)
        finally:
            await client.close()
            await runner.cleanup()

    assert asyncio.run(run()) == ("served-name", "served-name")
    assert seen[0]["Authorization"] == "Bearer sk-test"
    assert seen[0]["x-team"] == "bench"
