"""The server's own tokenizer, through ``/tokenize`` and ``/detokenize``.

It is the fallback when no local or hub tokenizer loads for the model, and what alignment
(``loadgen.server.alignment``) asks. Two request forms are understood: vLLM's (``{model, prompt,
add_special_tokens}`` -> ``tokens``; ``{model, tokens}`` -> ``prompt``) and llama.cpp's
(``{content, add_special}`` -> ``tokens``; ``{tokens}`` -> ``content``). The form is detected
once, by the probe, and every later call uses it. The probe waits for the server through
``retry_with_timeout``.

The vocabulary size is estimated as Rust ``vllm-bench`` does, ``max(2 * largest probe id,
131072)``; when the server refuses to detokenize the estimate's last id, the real size is found
by bisection over single-id ``/detokenize`` calls. The server gives no list of special ids, so the
random dataset may draw any id below the size.

Every call goes through ``ServerCalls``: a call whose connection broke (llama.cpp closes
connections; a pooled one may be stale) is sent again, up to ``RETRY_ATTEMPTS`` times, through
the shared ``retry_with_timeout``; the number in flight follows the server's answers
(``AdaptiveLimit``: a few at first, at most 64), since llama.cpp serves HTTP on a small pool of
threads that open connections hold: when the limit learns that pool's size, the calls move to
new connections no more numerous than it, and a job's end closes them; and a job (the dataset
build, the alignment) has a deadline and a progress bar shown once it runs past
``PROGRESS_DELAY_S``. Batches run on the coordinator's event loop; the blocking
``encode_batch``/``decode_batch`` are for the dataset builder's thread.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import orjson

from loadgen.progress_bar import progress_bar
from loadgen.server.adaptive_limit import AdaptiveLimit
from loadgen.server.client import ServerClient
from loadgen.server.errors import (
    ConnectionLost,
    NotRetryable,
    ReadinessTimeout,
    ServerError,
    ServerUnreachable,
)
from loadgen.server.retry import retry_with_timeout, show_waiting
from loadgen.text.tokenizer import TokenIds

log = logging.getLogger(__name__)

T = TypeVar("T")

VOCAB_FLOOR = 131072
PROBE_TEXT = "Hello, this is a test."
VLLM_FORM = "vLLM"
LLAMA_CPP_FORM = "llama.cpp"
# A broken connection is retried at once-ish, then with backoff: 0.05 + 0.1 + 0.2 + 0.4 s.
RETRY_ATTEMPTS = 5
RETRY_INTERVAL_S = 0.05
RETRY_BACKOFF = 2.0
PROGRESS_DELAY_S = 2.0  # a job shorter than this prints no progress bar


class BuildTimeout(ServerError):
    """A job of server tokenizer calls ran past its deadline; the message says how far it got."""


@dataclass
class _Job:
    what: str
    hint: str
    timeout_s: float
    started_s: float
    answered_before: int
    bar: Any = field(repr=False)  # progress_bar's: tqdm, or plain lines off a terminal


class ServerCalls:
    """POSTs to the server's tokenizer endpoints: retried when the connection breaks, paced by an
    ``AdaptiveLimit``, and bounded by the current job's deadline."""

    def __init__(self, client: ServerClient, limit: AdaptiveLimit | None = None) -> None:
        self.client = client
        self.limit = limit or AdaptiveLimit()
        self.answered = 0
        self.retried = 0
        self.renewed = 0
        self._http = client.fork()
        self._ceiling = self.limit.ceiling
        self._closing: set[asyncio.Task[None]] = set()
        self._waiters: deque[asyncio.Future[int]] = deque()
        self._job: _Job | None = None

    def begin(self, what: str, timeout_s: float, hint: str, *, progress: bool, desc: str) -> None:
        """Start a job: calls from now on fail with ``BuildTimeout`` after ``timeout_s``."""
        self.end()
        self.retried = 0
        bar = progress_bar(desc, " calls", delay_s=PROGRESS_DELAY_S, enabled=progress)
        now = asyncio.get_running_loop().time()
        self._job = _Job(what, hint, timeout_s, now, self.answered, bar)

    def end(self) -> None:
        """End the current job, if any: its deadline no longer applies and its bar closes."""
        if self._job is None:
            return
        self._job.bar.close()
        self._job = None
        self._new_connections()  # idle ones would hold a thread of llama.cpp's through the run
        if self.retried > 1:
            log.info(
                f"{self.retried} server tokenizer calls were sent again after a broken connection"
            )
        self.retried = 0

    async def post(self, url: str, body: bytes) -> bytes:
        """The answer to a POST, sent again (``RETRY_ATTEMPTS`` tries in all) if the connection
        broke; ``BuildTimeout`` once the job's deadline has passed."""
        job, loop = self._job, asyncio.get_running_loop()
        timeout_s = math.inf if job is None else job.started_s + job.timeout_s - loop.time()
        if timeout_s <= 0:
            raise self._timed_out()
        try:
            payload = await retry_with_timeout(
                timeout_s,
                RETRY_INTERVAL_S,
                lambda: self._attempt(url, body),
                attempts=RETRY_ATTEMPTS,
                retry_on=(ConnectionLost,),
                backoff=RETRY_BACKOFF,
                on_retry=self._on_retry,
            )
        except ReadinessTimeout:
            raise self._timed_out() from None
        except ConnectionLost as exc:
            raise ConnectionLost(f"{exc}; tried {RETRY_ATTEMPTS} times") from None
        self.answered += 1
        if self._job is not None:
            self._job.bar.update()
        return payload

    def _on_retry(self, error: str, retry_in_s: float, left_s: float) -> None:
        self.retried += 1
        if self.retried == 1:  # once per job: a bar, not a wall of lines, shows the rest
            write = self._job.bar.write if self._job is not None else log.info
            write(f"{error}: retrying")

    def _timed_out(self) -> BuildTimeout:
        job = self._job
        if job is None:  # the job ended while this call waited
            return BuildTimeout("server tokenizer call cut short at the end of its job")
        elapsed = asyncio.get_running_loop().time() - job.started_s
        done = self.answered - job.answered_before
        return BuildTimeout(
            f"{job.what}: {done:,} calls answered after {elapsed:.0f} s; {job.hint}"
        )

    async def _attempt(self, url: str, body: bytes) -> bytes:
        while True:
            ticket = await self._acquire()
            http = self._http
            # Look again once this call would count as slow: when every call in flight is
            # stuck, no answer comes to trigger the check.
            watch = asyncio.get_running_loop().call_later(self.limit.slow_s * 1.01, self._wake)
            outcome = self.limit.released  # an error answer or a cancellation: not about load
            try:
                payload = await http.request("POST", url, body)
                outcome = self.limit.answered
                return payload
            except ConnectionLost:
                if http is self._http:
                    outcome = self.limit.failed
                    raise
                # Its connection was closed by _new_connections: not a failure, send it again.
            finally:
                watch.cancel()
                outcome(ticket, asyncio.get_running_loop().time())
                self._wake()

    async def _acquire(self) -> int:
        """A ticket from the limit, first come first served."""
        waiter: asyncio.Future[int] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._wake()
        try:
            return await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():  # woken, then cancelled: free it
                self.limit.released(waiter.result(), asyncio.get_running_loop().time())
                self._wake()
            raise

    def _wake(self) -> None:
        now = asyncio.get_running_loop().time()
        while self.limit.can_start(now) and self._waiters:  # the check runs even with no waiter
            waiter = self._waiters.popleft()
            if not waiter.done():  # a cancelled waiter is skipped
                waiter.set_result(self.limit.start(now))
        if self.limit.ceiling < self._ceiling:
            # A server serving each open connection on one of a few threads (llama.cpp) serves
            # no call sent on a connection past them until another closes: start afresh with
            # no more connections than the new ceiling.
            self._ceiling = self.limit.ceiling
            self.renewed += 1
            self._new_connections()

    def _new_connections(self) -> None:
        """Close the connections in use (their calls fail and are sent again) and pooled."""
        old, self._http = self._http, self.client.fork()
        task = asyncio.get_running_loop().create_task(old.close())
        self._closing.add(task)
        task.add_done_callback(self._closing.discard)


class ServerTokenizer:
    """A ``TokenCodec`` backed by the server's ``/tokenize`` and ``/detokenize``."""

    def __init__(
        self,
        calls: ServerCalls,
        model: str,
        form: str,
        vocab_size: int = 0,
        num_special_tokens: int = 0,
    ) -> None:
        self.calls = calls
        self.model = model
        self.form = form
        self.vocab_size = vocab_size
        self.num_special_tokens = num_special_tokens
        self.special_ids: list[int] = []
        self.loop = asyncio.get_running_loop()
        self.tokenize_url = f"{calls.client.server_url}/tokenize"
        self.detokenize_url = f"{calls.client.server_url}/detokenize"

    @classmethod
    async def connect(
        cls, client: ServerClient, model: str, timeout_s: float, interval_s: float
    ) -> ServerTokenizer:
        """Probe the server's tokenizer (waiting for the server as configured) and size it."""
        calls = ServerCalls(client)
        try:
            form, plain = await retry_with_timeout(
                timeout_s,
                interval_s,
                lambda: detect_form(calls, model, PROBE_TEXT),
                waiting_for="the server's tokenizer",
                on_retry=show_waiting("the server's tokenizer"),
            )
        except NotRetryable as exc:
            raise NotRetryable(f"{exc}; pass --tokenizer", exc.status) from None
        tokenizer = cls(calls, model, form)
        with_special = await tokenizer.tokenize(PROBE_TEXT, add_special=True)
        tokenizer.num_special_tokens = max(0, len(with_special) - len(plain))
        tokenizer.vocab_size = await tokenizer._find_vocab_size(max(plain + with_special))
        return tokenizer

    def begin_build(self, timeout_s: float, num_prompts: int, *, progress: bool) -> None:
        """Bound the dataset build's calls by ``timeout_s`` and show a bar if it runs long."""
        prompts = f" of {num_prompts:,} prompts" if num_prompts > 0 else ""
        self.calls.begin(
            f"building the dataset{prompts} through the server's /tokenize and /detokenize",
            timeout_s,
            "pass --tokenizer to use a local tokenizer, or raise --server-tokenizer-timeout-sec",
            progress=progress,
            desc="Building the dataset with the server's tokenizer",
        )

    def end_build(self) -> None:
        """The dataset is built: later calls (output lengths after the run) have no deadline."""
        self.calls.end()

    # --- async API, on the loop ---

    async def tokenize(self, text: str, *, add_special: bool = False) -> list[int]:
        """The server's token ids of ``text``."""
        return await _tokenize(self.calls, self.form, self.model, text, add_special=add_special)

    async def detokenize(self, ids: TokenIds) -> str:
        """The server's text of ``ids``."""
        if self.form == VLLM_FORM:
            body: dict[str, Any] = {"model": self.model, "tokens": ids}
        else:
            body = {"tokens": ids}
        url = self.detokenize_url
        data = _json_object(
            await self.calls.post(url, orjson.dumps(body, option=orjson.OPT_SERIALIZE_NUMPY)), url
        )
        keys = ("prompt", "text", "content") if self.form == VLLM_FORM else ("content",)
        text = next((data[key] for key in keys if key in data), None)  # "text": SGLang's
        if not isinstance(text, str):
            raise NotRetryable(f"POST {url} answered without '{keys[0]}' ({self.form} form)")
        return text

    async def aencode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens, tokenized concurrently."""
        return await gather_or_cancel([self.tokenize(t) for t in texts])

    async def adecode_batch(self, token_lists: Sequence[TokenIds]) -> list[str]:
        """Text of each id list, detokenized concurrently."""
        return await gather_or_cancel([self.detokenize(ids) for ids in token_lists])

    # --- blocking API, for the dataset builder's thread ---

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens (call from a thread, not the loop)."""
        return self._from_thread(lambda: self.aencode_batch(texts))

    def decode_batch(self, token_lists: Sequence[TokenIds]) -> list[str]:
        """Text of each id list (call from a thread, not the loop)."""
        return self._from_thread(lambda: self.adecode_batch(token_lists))

    def _from_thread(self, make: Callable[[], Awaitable[T]]) -> T:
        try:
            on_loop = asyncio.get_running_loop() is self.loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            raise RuntimeError("ServerTokenizer's blocking calls would block the event loop")

        async def run() -> T:
            return await make()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result()

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
            await self.detokenize([token_id])
        except (ServerUnreachable, BuildTimeout):
            raise
        except ServerError:
            return False
        return True


async def detect_form(calls: ServerCalls, model: str, text: str) -> tuple[str, list[int]]:
    """The request form the server's ``/tokenize`` understands, and ``text``'s ids in it
    (without special tokens). A 404 (no /tokenize) is raised as it is."""
    try:
        return VLLM_FORM, await _tokenize(calls, VLLM_FORM, model, text, add_special=False)
    except NotRetryable as vllm_error:
        if vllm_error.status == 404:
            raise
        try:
            ids = await _tokenize(calls, LLAMA_CPP_FORM, model, text, add_special=False)
        except NotRetryable:
            raise NotRetryable(
                f"the server's /tokenize takes neither vLLM's nor llama.cpp's form ({vllm_error})"
            ) from None
        return LLAMA_CPP_FORM, ids


async def gather_or_cancel(awaitables: list[Awaitable[T]]) -> list[T]:
    """Await all concurrently; on the first failure cancel the rest and raise it."""
    tasks = [asyncio.ensure_future(a) for a in awaitables]
    try:
        return list(await asyncio.gather(*tasks))
    finally:
        for task in tasks:
            task.cancel()


async def _tokenize(
    calls: ServerCalls, form: str, model: str, text: str, *, add_special: bool
) -> list[int]:
    url = f"{calls.client.server_url}/tokenize"
    if form == VLLM_FORM:
        body: dict[str, Any] = {"model": model, "prompt": text, "add_special_tokens": add_special}
    else:
        body = {"content": text, "add_special": add_special}
    data = _json_object(await calls.post(url, orjson.dumps(body)), url)
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
        raise NotRetryable(f"POST {url} answered something that is not JSON") from None
    if not isinstance(data, dict):
        raise NotRetryable(f"POST {url} answered JSON that is not an object")
    return data
