"""--insecure against a real HTTPS server on 127.0.0.1 with a self-signed certificate
(tests/data/selfsigned.*, CN and SAN 127.0.0.1), run in a thread of the test process."""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from aiohttp import web
from helpers import DATA, run_in_process

EVENT = b'data: {"choices":[{"index":0,"text":"hi","finish_reason":null}]}\n\n'
USAGE = b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n'


def tls_app() -> web.Application:
    async def models(request: web.Request) -> web.Response:
        return web.json_response({"data": [{"id": "tls-model", "root": "loadgen-mock"}]})

    async def completions(request: web.Request) -> web.StreamResponse:
        await request.read()
        response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await response.prepare(request)
        await response.write(EVENT + EVENT + USAGE + b"data: [DONE]\n\n")
        await response.write_eof()
        return response

    app = web.Application()
    app.router.add_get("/v1/models", models)
    app.router.add_post("/v1/completions", completions)
    return app


@contextmanager
def https_server() -> Iterator[str]:
    """Serve tls_app over HTTPS on a free port in a thread; yield its base URL."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(DATA / "selfsigned.crt", DATA / "selfsigned.key")
    loop = asyncio.new_event_loop()
    runner = web.AppRunner(tls_app())
    loop.run_until_complete(runner.setup())
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    loop.run_until_complete(site.start())
    port = runner.addresses[0][1]
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{port}"
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(timeout=10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=10)
        loop.close()


@pytest.mark.parametrize("insecure", [True, False])
def test_insecure_skips_the_certificate_check(tmp_path: Path, insecure: bool) -> None:
    with https_server() as url:
        proc = run_in_process(
            "--base-url", url, "--workers", "1", "--num-prompts", "3", "--random-input-len", "8",
            "--random-output-len", "2", "--disable-tqdm", "--save-result",
            "--result-dir", str(tmp_path), *(["--insecure"] if insecure else []),
        )  # fmt: skip
    if insecure:
        assert proc.returncode == 0, proc.stderr
        result = json.loads(next(tmp_path.glob("*.json")).read_text())
        assert result["completed"] == 3 and result["model_id"] == "loadgen-mock"
    else:
        # Model discovery is the first request, and the certificate is refused there.
        assert proc.returncode == 1
        (line,) = proc.stderr.splitlines()
        assert line.startswith(f"error: TLS failed with {url}/v1/models: ")
        assert "certificate verify failed" in line
        assert line.endswith("--insecure skips the certificate check")
