"""An in-process /tokenize and /detokenize server on 127.0.0.1 that misbehaves like llama.cpp's:
it takes one request form only, closes connections without answering, answers slowly, or
stalls the calls past a small pool of "threads"."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from tokenizers import Tokenizer

from loadgen.text.tokenizer import load_tokenizer


@dataclass
class FakeServer:
    """What the server does, and what it saw."""

    form: str = "llama.cpp"  # "llama.cpp": only {"content"}; "vLLM": only {"prompt"}
    tokenizer: Tokenizer = field(default_factory=lambda: load_tokenizer("loadgen-mock"))
    drop_every: int = 0  # close the connection without answering on every n-th request
    delay_s: float = 0.0  # before each answer
    threads: int = 0  # > 0: a call past this many in flight waits stall_s first
    stall_s: float = 1.0
    status: dict[str, int] = field(default_factory=dict)  # path -> forced error status
    not_json: bool = False
    url: str = ""
    bodies: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    in_flight: int = 0
    peak: int = 0
    stalls: int = 0
    dropped: int = 0

    async def handle(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append((request.path, body))
        if self.drop_every and len(self.bodies) % self.drop_every == 0:
            self.dropped += 1
            assert request.transport is not None
            request.transport.close()  # llama.cpp closing a connection the client reused
            await asyncio.sleep(60)
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            if self.threads and self.in_flight > self.threads:
                self.stalls += 1
                await asyncio.sleep(self.stall_s)
            if self.delay_s:
                await asyncio.sleep(self.delay_s)
            return self.answer(request.path, body)
        finally:
            self.in_flight -= 1

    def answer(self, path: str, body: dict[str, Any]) -> web.Response:
        if path in self.status:
            return web.json_response({"error": {"message": "nope"}}, status=self.status[path])
        if self.not_json:
            return web.Response(text="<html>busy</html>")
        vocab = self.tokenizer.get_vocab_size()
        if path == "/tokenize":
            llama = self.form == "llama.cpp"
            key, special = ("content", "add_special") if llama else ("prompt", "add_special_tokens")
            if key not in body:
                if self.form == "llama.cpp":
                    return web.json_response({"tokens": []})  # llama.cpp's answer to vLLM's form
                return web.json_response({"error": {"message": "field required"}}, status=400)
            ids = self.tokenizer.encode(body[key], add_special_tokens=body.get(special, True)).ids
            return web.json_response({"tokens": ids})
        tokens = body["tokens"]
        if any(t >= vocab for t in tokens):
            return web.json_response({"error": {"message": "invalid token"}}, status=500)
        text = self.tokenizer.decode(tokens, skip_special_tokens=False)
        return web.json_response({"content" if self.form == "llama.cpp" else "prompt": text})

    def paths(self) -> list[str]:
        """The paths of the requests seen, in order."""
        return [path for path, _ in self.bodies]


@asynccontextmanager
async def serving(server: FakeServer) -> AsyncIterator[FakeServer]:
    """Serve ``server`` on a free loopback port; ``server.url`` is its base URL."""
    app = web.Application()
    app.router.add_post("/tokenize", server.handle)
    app.router.add_post("/detokenize", server.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    server.url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        yield server
    finally:
        await runner.cleanup()
