"""What the mock's handlers and its middleware share: the config, the personality, the tokenizer,
the error-injection generator, the response-id counter and the counters ``/mock/stats`` and
``/metrics`` report; and the checks every handler makes of a request."""

from __future__ import annotations

import asyncio
import functools
import itertools
import random
import secrets
import time
from typing import Any

import orjson
from tokenizers import Encoding

from loadgen.mock.admission import RunningSlots
from loadgen.mock.bodies import RequestError
from loadgen.mock.config import MockConfig
from loadgen.mock.connections import ConnectionHabits
from loadgen.mock.load import LoadSnapshot, ServerLoad
from loadgen.mock.personalities import PERSONALITIES
from loadgen.mock.personalities.base import Personality, TokenCounts
from loadgen.mock.prefix_cache import PrefixCache
from loadgen.mock.recorder import TimingRecorder
from loadgen.text.tokenizer import load_tokenizer

# Longer prompts are encoded in the default executor so that other requests' streams keep flowing.
EXECUTOR_ENCODE_CHARS = 4096


class MockState:
    """The state one mock server's handlers share."""

    def __init__(self, config: MockConfig) -> None:
        self.config = config
        self.personality: Personality = PERSONALITIES[config.personality]
        personality = self.personality
        self.keepalive_timeout_s = config.keepalive_timeout_s or personality.keepalive_timeout_s
        threads = config.http_threads
        self.connections = ConnectionHabits(
            handlers=personality.http_threads if threads is None else threads,
            keepalive_timeout_s=self.keepalive_timeout_s,
            close_delay_ms=(0.3, 0.7) if personality.close_after_stream else None,
            seed=config.seed,
        )
        self.extra_headers = personality.headers(self.keepalive_timeout_s)
        self.tokenizer = load_tokenizer(config.tokenizer)
        self.vocab_size = self.tokenizer.get_vocab_size()
        self.rng = random.Random(config.seed)
        self.ttft_s = config.ttft_ms / 1000.0
        self.itl_s = config.itl_ms / 1000.0
        # --prefill-us-per-token: TTFT charges the prompt tokens this cache does not hold.
        self.prefix_cache = PrefixCache() if config.prefill_us_per_token > 0 else None
        self.prefix_cache_resets = 0  # POSTs to the personality's prefix_cache_reset
        self.slots = RunningSlots(config.max_running)  # --max-running: the rest queue
        self.load = ServerLoad(self.itl_s, config.kv_cache_tokens)  # what /metrics reports
        self.model_json = orjson.dumps(config.model)
        self.id_base = secrets.token_hex(8)
        self.counter = itertools.count()
        self.recorder = TimingRecorder() if config.record_timings is not None else None
        self.requests_seen: dict[str, int] = {}  # "METHOD /path" -> requests, 503s included
        self.in_flight = 0  # requests being handled (a stream until its last write)
        self.max_in_flight = 0
        self.served = 0  # requests whose handling ended (answers of any status)
        self.counts = TokenCounts()  # usage reported by generation responses, summed
        self.loading_until = 0.0  # time.monotonic() until which the model "loads" (port open)
        self.gate_until = 0.0  # the later of that and the end of --unavailable-for
        # Speculative-decoding counters, as vLLM's /metrics reports them (--spec-decode-...).
        self.spec_drafts = 0
        self.spec_accepted_per_pos = [0] * config.spec_decode_draft_tokens
        self.opened_at: float | None = None  # time.monotonic() when the port opened

    def mark_open(self) -> None:
        """Start the clocks of --unavailable-for and, where the port opens at once, loading."""
        self.opened_at = now = time.monotonic()
        if not self.personality.port_closed_while_loading:
            self.loading_until = now + self.config.startup_delay_s
        unavailable_until = now + self.config.unavailable_for_s
        self.gate_until = max(self.loading_until, unavailable_until)

    def load_now(self) -> LoadSnapshot:
        """The load /metrics reports now: running, waiting, KV cache, tokens, prefix cache."""
        cache = self.prefix_cache
        return self.load.snapshot(
            self.slots.waiting,
            None if cache is None else cache.queried_tokens,
            None if cache is None else cache.hit_tokens,
        )

    def response_id(self, prefix: str) -> str:
        """A new response id: ``prefix``, this server's random base and a counter."""
        return f"{prefix}{self.id_base}{next(self.counter):016x}"

    def inject_error(self) -> None:
        """Refuse the request with a 500 at the rate --error-rate asks for."""
        if self.config.error_rate > 0 and self.rng.random() < self.config.error_rate:
            raise RequestError(500, "Injected error (mock server --error-rate).")

    def check_model(self, body: dict[str, Any], required: bool) -> None:
        """Refuse a request naming a model (or adapter) not served, where the server checks."""
        model = body.get("model")
        if model == self.config.model or model in self.config.lora_names:
            return
        if (model is None and not required) or not self.personality.checks_model:
            return
        raise RequestError(404, "unknown model", self.personality.unknown_model(model))

    async def encode(self, text: str, add_special_tokens: bool = True) -> Encoding:
        """Tokenize ``text``, off the event loop when it is long."""
        if len(text) <= EXECUTOR_ENCODE_CHARS:
            return self.tokenizer.encode(text, add_special_tokens=add_special_tokens)
        encode = functools.partial(
            self.tokenizer.encode, text, add_special_tokens=add_special_tokens
        )
        return await asyncio.get_running_loop().run_in_executor(None, encode)

    def check_token_ids(self, ids: list[Any]) -> list[int]:
        """``ids``, refused unless every one is an integer in the vocabulary."""
        if set(map(type, ids)) != {int}:
            raise RequestError(400, "token id lists must hold integers only")
        if min(ids) < 0 or max(ids) >= self.vocab_size:
            raise RequestError(400, f"token ids must be in [0, {self.vocab_size})")
        return ids
