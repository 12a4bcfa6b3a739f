"""What the mock's ``/metrics`` reports of its load, as a server would: requests running and
waiting, the KV cache the running ones fill, tokens counted as they are generated.

The hot path only notes each generation request as it starts running (after its turn under
--max-running) and as it ends; everything else is computed when ``/metrics`` is scraped. A
running request holds its prompt's tokens in the KV cache from its start and one more token per
token generated: its first at ``ttft``, each later one ``itl`` after the one before (the
schedule the mock streams at). The KV-cache usage is those tokens of every running request over
``--kv-cache-tokens``; the mock neither queues nor preempts on it, so it stops at 1 and no
request is ever preempted (the servers' preemption counters stay at 0).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import NamedTuple


class Running(NamedTuple):
    """One request running: when its first token is due (time.monotonic()), its prompt and
    answer sizes."""

    first_at: float
    prompt_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class LoadSnapshot:
    """The server's load at a scrape: what each personality's ``/metrics`` lines are made of."""

    running: int  # requests running (at most --max-running)
    waiting: int  # requests queued behind --max-running
    prompt_tokens: int  # prompt tokens of the requests started, total
    prompt_computed: int  # of them, not found in the prefix cache (llama.cpp counts these)
    generation_tokens: int  # tokens generated so far, total (running requests' so far)
    requests: int  # generation requests finished
    finished_prompt_tokens: int  # of the requests finished (TGI counts a request as it ends)
    finished_generation_tokens: int
    kv_tokens: int  # tokens the running requests hold in the KV cache
    kv_capacity: int  # --kv-cache-tokens
    reserved_tokens: int  # prompt + whole answer of each running request (TGI's batch budget)
    cache_queried: int | None  # prefix-cache lookups (tokens); None: the mock keeps no cache
    cache_hits: int | None
    preemptions: int = 0  # the mock never preempts

    @property
    def kv_usage(self) -> float:
        """The fraction of the KV cache in use (0-1)."""
        return min(self.kv_tokens / self.kv_capacity, 1.0) if self.kv_capacity else 0.0

    @property
    def cache_hit_rate(self) -> float:
        """Prefix-cache hits over lookups so far (0 before any, or without a cache)."""
        if not self.cache_queried or self.cache_hits is None:
            return 0.0
        return self.cache_hits / self.cache_queried


class ServerLoad:
    """The generation requests running, noted as they start and end."""

    def __init__(self, itl_s: float, kv_capacity: int) -> None:
        self.itl_s = itl_s
        self.kv_capacity = kv_capacity
        self.running: dict[int, Running] = {}
        self.ids = itertools.count()
        self.prompt_tokens = 0
        self.prompt_computed = 0
        self.generation_tokens = 0  # of the requests that ended, and the running ones' whole
        self.requests = 0
        self.finished_prompt_tokens = 0
        self.finished_generation_tokens = 0

    def start(self, prompt_tokens: int, output_tokens: int, ttft_s: float, cached: int) -> int:
        """Note a request that starts running; its key for ``end``."""
        key = next(self.ids)
        first_at = time.monotonic() + ttft_s
        self.running[key] = Running(first_at, prompt_tokens, output_tokens)
        self.prompt_tokens += prompt_tokens
        self.prompt_computed += prompt_tokens - max(cached, 0)
        self.generation_tokens += output_tokens
        return key

    def end(self, key: int) -> None:
        """Note that the request ``key`` ended (answered, failed or gone)."""
        request = self.running.pop(key, None)
        if request is not None:
            self.requests += 1
            self.finished_prompt_tokens += request.prompt_tokens
            self.finished_generation_tokens += request.output_tokens

    def snapshot(
        self, waiting: int, cache_queried: int | None, cache_hits: int | None
    ) -> LoadSnapshot:
        """The load now; ``waiting`` the requests queued, the prefix cache's counters."""
        now = time.monotonic()
        per_token = 1.0 / self.itl_s if self.itl_s > 0 else None
        prompts = outputs = done = 0
        for first_at, prompt, output in self.running.values():  # ~1 us a request running
            prompts += prompt
            outputs += output
            if now >= first_at:
                done += (
                    output
                    if per_token is None
                    else min(int((now - first_at) * per_token) + 1, output)
                )
        kv, reserved, not_yet = prompts + done, prompts + outputs, outputs - done
        return LoadSnapshot(
            running=len(self.running),
            waiting=waiting,
            prompt_tokens=self.prompt_tokens,
            prompt_computed=self.prompt_computed,
            generation_tokens=self.generation_tokens - not_yet,
            requests=self.requests,
            finished_prompt_tokens=self.finished_prompt_tokens,
            finished_generation_tokens=self.finished_generation_tokens,
            kv_tokens=kv,
            kv_capacity=self.kv_capacity,
            reserved_tokens=reserved,
            cache_queried=cache_queried,
            cache_hits=cache_hits,
        )
