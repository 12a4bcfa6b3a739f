"""The server's own tokenizer, through ``/tokenize`` and ``/detokenize``.

It is the fallback when no local or hub tokenizer loads for the model. Two request forms are
understood: vLLM's (``{model, prompt, add_special_tokens}`` -> ``tokens``; ``{model, tokens}``
-> ``prompt``) and llama.cpp's (``{content, add_special}`` -> ``tokens``; ``{tokens}`` ->
``content``). The probe that picks the form waits for the server through ``retry_with_timeout``.

The vocabulary size is estimated as Rust ``vllm-bench`` does, ``max(2 * largest probe id,
131072)``; when the server refuses to detokenize the estimate's last id, the real size is found
by bisection over single-id ``/detokenize`` calls. The server gives no list of special ids, so the
random dataset may draw any id below the size.

Batches go out as concurrent requests (64 at a time) on the coordinator's event loop. The
blocking ``encode_batch``/``decode_batch`` are for the dataset builder's thread; they hand the
batch to the loop and wait, so the loop itself never blocks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence
from typing import Any, TypeVar

import orjson

from loadgen.readiness import (
    NotRetryable,
    ServerError,
    ServerUnreachable,
    StartupClient,
    print_waiting,
    retry_with_timeout,
)

T = TypeVar("T")

CONCURRENCY = 64
VOCAB_FLOOR = 131072
PROBE_TEXT = "Hello, this is a test."
VLLM_FORM = "vLLM"
LLAMA_CPP_FORM = "llama.cpp"


class ServerTokenizer:
    """A ``TokenCodec`` backed by the server's ``/tokenize`` and ``/detokenize``."""

    def __init__(
        self,
        client: StartupClient,
        model: str,
        form: str,
        vocab_size: int,
        num_special_tokens: int,
    ) -> None:
        self.client = client
        self.model = model
        self.form = form
        self.vocab_size = vocab_size
        self.num_special_tokens = num_special_tokens
        self.special_ids: list[int] = []
        self.loop = asyncio.get_running_loop()
        self.tokenize_url = f"{client.server_url}/tokenize"
        self.detokenize_url = f"{client.server_url}/detokenize"
        self._slots = asyncio.Semaphore(CONCURRENCY)

    @classmethod
    async def connect(
        cls, client: StartupClient, model: str, timeout_s: float, interval_s: float
    ) -> ServerTokenizer:
        """Probe the server's tokenizer (waiting for the server as configured) and size it."""
        form, plain, with_special = await retry_with_timeout(
            timeout_s,
            interval_s,
            lambda: _probe(client, model),
            waiting_for="the server's tokenizer",
            on_retry=print_waiting("the server's tokenizer"),
        )
        tokenizer = cls(client, model, form, 0, max(0, len(with_special) - len(plain)))
        tokenizer.vocab_size = await tokenizer._find_vocab_size(max(plain + with_special))
        return tokenizer

    # --- async API, on the loop ---

    async def aencode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens, tokenized concurrently."""
        return await asyncio.gather(*(self._limited(self._encode(t)) for t in texts))

    async def adecode_batch(self, token_lists: Sequence[Sequence[int]]) -> list[str]:
        """Text of each id list, detokenized concurrently."""
        return await asyncio.gather(*(self._limited(self._decode(ids)) for ids in token_lists))

    # --- blocking API, for the dataset builder's thread ---

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens (call from a thread, not the loop)."""
        return self._from_thread(self.aencode_batch(texts))

    def decode_batch(self, token_lists: Sequence[Sequence[int]]) -> list[str]:
        """Text of each id list (call from a thread, not the loop)."""
        return self._from_thread(self.adecode_batch(token_lists))

    def _from_thread(self, coro: Awaitable[T]) -> T:
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            coro.close()  # type: ignore[attr-defined]
            raise RuntimeError("ServerTokenizer's blocking calls would block the event loop")
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()  # type: ignore[arg-type]

    async def _limited(self, coro: Awaitable[T]) -> T:
        async with self._slots:
            return await coro

    async def _encode(self, text: str) -> list[int]:
        return await _tokenize(self.client, self.form, self.model, text, add_special=False)

    async def _decode(self, ids: Sequence[int]) -> str:
        if self.form == VLLM_FORM:
            body: dict[str, Any] = {"model": self.model, "tokens": ids}
        else:
            body = {"tokens": ids}
        payload = await self.client.request(
            "POST", self.detokenize_url, orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)
        )
        data = _json_object(payload, self.detokenize_url)
        text = data.get("prompt", data.get("content"))
        if not isinstance(text, str):
            raise ServerError(f"POST {self.detokenize_url} answered without 'prompt' or 'content'")
        return text

    async def _find_vocab_size(self, largest_seen: int) -> int:
        """Rust vllm-bench's estimate, narrowed by bisection if the server refuses its last id."""
        estimate = max(2 * largest_seen, VOCAB_FLOOR)
        if await self._accepts(estimate - 1):
            return estimate
        good, bad = largest_seen, estimate - 1
        while bad - good > 1:
            middle = (good + bad) // 2
            if await self._accepts(middle):
                good = middle
            else:
                bad = middle
        return good + 1

    async def _accepts(self, token_id: int) -> bool:
        try:
            await self._decode([token_id])
        except ServerUnreachable:
            raise
        except ServerError:
            return False
        return True


async def _probe(client: StartupClient, model: str) -> tuple[str, list[int], list[int]]:
    """The request form the server understands, and the probe text's ids without and with
    special tokens."""
    try:
        plain = await _tokenize(client, VLLM_FORM, model, PROBE_TEXT, add_special=False)
        form = VLLM_FORM
    except NotRetryable as vllm_error:
        try:
            plain = await _tokenize(client, LLAMA_CPP_FORM, model, PROBE_TEXT, add_special=False)
        except NotRetryable:
            raise NotRetryable(
                f"the server's /tokenize takes neither vLLM's nor llama.cpp's form "
                f"({vllm_error}); pass --tokenizer"
            ) from None
        form = LLAMA_CPP_FORM
    with_special = await _tokenize(client, form, model, PROBE_TEXT, add_special=True)
    return form, plain, with_special


async def _tokenize(
    client: StartupClient, form: str, model: str, text: str, *, add_special: bool
) -> list[int]:
    url = f"{client.server_url}/tokenize"
    if form == VLLM_FORM:
        body: dict[str, Any] = {"model": model, "prompt": text, "add_special_tokens": add_special}
    else:
        body = {"content": text, "add_special": add_special}
    data = _json_object(await client.request("POST", url, orjson.dumps(body)), url)
    tokens = data.get("tokens")
    # llama.cpp answers a body without 'content' with an empty list rather than an error.
    if not isinstance(tokens, list) or (text and not tokens):
        raise NotRetryable(f"POST {url} answered without token ids in the {form} form")
    if not all(isinstance(t, int) for t in tokens):
        raise NotRetryable(f"POST {url} answered token ids that are not integers")
    return tokens


def _json_object(payload: bytes, url: str) -> dict[str, Any]:
    try:
        data = orjson.loads(payload)
    except orjson.JSONDecodeError:
        raise ServerError(f"{url} answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise ServerError(f"{url} answered JSON that is not an object")
    return data
