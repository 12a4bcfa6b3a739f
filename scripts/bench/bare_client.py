"""The least an HTTP client can do, timed as the clients are: accuracy.py's floor client.

Run as its own process against the recording mock with the load accuracy.py gives the clients
(Poisson arrivals, the concurrency cap, request ids ``PREFIX + index``), it keeps one open
connection per stream slot (opened before the first send), writes requests built before the run
as one ``transport.write`` each, stamps the send right before it (where the clients stamp
theirs), and stamps each read of the reply on arrival, counting the token events in it by one
byte count. No HTTP library, no JSON, no tokenizer, no result but the stamps. What its send leg
and delivery still show is the machine's and the mock's share of every client's error: the
mock's own loop reaching the request's handler among the streams it is writing, and waking a
process twice (mock, then client) per token.

    python scripts/bench/bare_client.py URL CONCURRENCY REQUEST_RATE NUM_PROMPTS \
        INPUT_LEN OUTPUT_LEN PREFIX RESULT_JSON [MODEL]

The result JSON holds what ``loadgen.timing_error.ClientRun.from_result`` reads: ``start_times``
(perf_counter seconds, the clock the mock stamps with), ``ttfts``, ``itls`` and ``errors``.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections import deque
from pathlib import Path
from time import perf_counter
from urllib.parse import urlsplit

import numpy as np
import uvloop

TOKEN_EVENT = b'"choices":[{'  # the mock's token chunks: compact JSON, choices not empty
END_OF_BODY = b"\r\n0\r\n\r\n"  # the last chunk of a chunked reply
CONTENT_LENGTH = re.compile(rb"(?i)\r\ncontent-length:\s*(\d+)")  # a reply of known length
SEED = 0


class Slot(asyncio.Protocol):
    """One keep-alive connection and the request on it, if any."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.events: list[float] = []
        self.carry = b""  # the last bytes of the previous read: a needle may span two reads
        self.head = b""  # the reply's bytes until its header has ended
        self.left = -1  # body bytes still to come (Content-Length), or -1: chunked
        self.done: asyncio.Future | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def send(self, request: bytes) -> tuple[float, asyncio.Future]:
        """Write one request; its send instant and a future set when the reply has ended."""
        self.events = []
        self.carry = self.head = b""
        self.left = -2  # the header has not ended
        self.done = asyncio.get_running_loop().create_future()
        start = perf_counter()
        assert self.transport is not None
        self.transport.write(request)
        return start, self.done

    def data_received(self, data: bytes) -> None:
        now = perf_counter()
        seen = self.carry + data
        n = seen.count(TOKEN_EVENT)
        if n:
            self.events.extend([now] * n)
        self.carry = seen[-(len(TOKEN_EVENT) - 1) :]
        if self.left == -2:  # the header, read once: how the body ends
            self.head += data
            end = self.head.find(b"\r\n\r\n")
            if end < 0:
                return
            length = CONTENT_LENGTH.search(self.head[:end])
            self.left = int(length[1]) if length else -1
            data = self.head[end + 4 :]
        if self.left >= 0:
            self.left -= len(data)
            ended = self.left <= 0
        else:
            ended = seen.endswith(END_OF_BODY)
        if ended and self.done is not None and not self.done.done():
            self.done.set_result(None)

    def connection_lost(self, exc: Exception | None) -> None:
        self.transport = None
        if self.done is not None and not self.done.done():
            self.done.set_exception(ConnectionError(f"connection lost: {exc}"))


def build_requests(url: str, model: str, n: int, input_len: int, output_len: int, prefix: str):
    """Every request's bytes, complete, before the run."""
    parts = urlsplit(url)
    body = json.dumps(
        {
            "model": model,
            "prompt": " the" * input_len,
            "max_tokens": output_len,
            "ignore_eos": True,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    head = (
        f"POST /v1/completions HTTP/1.1\r\nHost: {parts.netloc}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n"
    )
    return [(head + f"x-request-id: {prefix}{i}\r\n\r\n").encode() + body for i in range(n)]


async def run(args: list[str]) -> dict:
    """Send every request on schedule; return the result JSON's fields."""
    url, concurrency, rate, n = args[0], int(args[1]), float(args[2]), int(args[3])
    input_len, output_len, prefix = int(args[4]), int(args[5]), args[6]
    model = args[8] if len(args) > 8 else "loadgen-mock"
    requests = build_requests(url, model, n, input_len, output_len, prefix)
    gaps = np.random.default_rng(SEED).exponential(1 / rate, n) if rate > 0 else np.zeros(n)
    arrivals = np.cumsum(gaps) - gaps[0]
    parts = urlsplit(url)
    loop = asyncio.get_running_loop()

    async def connect() -> Slot:
        _, slot = await loop.create_connection(Slot, parts.hostname, parts.port)
        return slot

    free: deque[Slot] = deque([await connect() for _ in range(concurrency)])
    waiting: deque[asyncio.Future] = deque()
    starts = np.full(n, np.nan)
    ttfts = np.zeros(n)
    itls: list[list[float]] = [[] for _ in range(n)]
    errors = [""] * n

    async def one(i: int) -> None:
        while not free:  # the concurrency cap: wait for a slot, first come first served
            turn = loop.create_future()
            waiting.append(turn)
            await turn
        slot = free.popleft()
        try:
            starts[i], done = slot.send(requests[i])
            await done
            if slot.events:
                ttfts[i] = slot.events[0] - starts[i]
                itls[i] = np.diff(slot.events).tolist()
            else:
                errors[i] = "no token event"
        except ConnectionError as exc:
            errors[i] = str(exc)
            slot = await connect()
        free.append(slot)
        if waiting:
            waiting.popleft().set_result(None)

    t0 = perf_counter() + 0.05
    tasks = []
    for i in range(n):
        delay = t0 + arrivals[i] - perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.ensure_future(one(i)))
    await asyncio.gather(*tasks)
    for slot in free:
        if slot.transport is not None:
            slot.transport.close()
    return {
        "start_times": starts.tolist(),
        "ttfts": ttfts.tolist(),
        "itls": itls,
        "errors": errors,
    }


def main() -> None:
    """Run from the command line (the module docstring's arguments)."""
    if len(sys.argv) < 9:
        raise SystemExit(__doc__)
    result = uvloop.run(run(sys.argv[1:]))
    Path(sys.argv[8]).write_text(json.dumps(result))


if __name__ == "__main__":
    main()
