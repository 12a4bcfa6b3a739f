"""The bytes of one streamed response, rendered from fragments precomputed once per server.

A stream of ``n`` token events is ``head``, then for each event ``k < n - 1`` the per-request
``prefix``, the escaped text of cycle token ``k mod len(cycle)`` and the personality's constant
fragment end (and, for :class:`SuffixEvents`, per-request ``suffix`` bytes), then the final event
(``last_prefix or prefix``, its text, ``last_suffix``) and ``tail``. Its size is therefore known
before anything is written, and a paced stream's usual event costs one or two concatenations.
"""

from __future__ import annotations

from dataclasses import dataclass
from time import perf_counter_ns

from loadgen.mock.personalities.base import TTFT_WIDTH, fixed_width


@dataclass(slots=True)
class Events:
    """The SSE bytes of one streamed response, built from precomputed fragments."""

    head: bytes  # sent before the first token event (chat's role chunk)
    prefix: bytes  # per-request event start, up to the opening quote of the token text
    fragments: list[bytes]  # escaped token text + event end, per cycle position
    fragment_offsets: list[int]  # prefix sums of the fragments' lengths
    escaped: list[bytes]
    last_suffix: bytes  # event end of the final token event, with its finish_reason
    tail: bytes  # usage chunk (if asked for) and [DONE]
    n: int
    ttft_at: int = -1  # offset in tail of the TTFT measured at the first write, or -1
    arrival_ns: int = 0  # the request's arrival, for that TTFT
    first_ns: int = 0  # when token event 0 was rendered, with ttft_at set
    last_prefix: bytes = b""  # the final token event's start, when not prefix

    def size(self) -> int:
        """The length in bytes of the whole stream, ``len(self.render(0, self.n))``."""
        full, rest = divmod(self.n - 1, len(self.fragments))
        return (
            len(self.head)
            + self.n * len(self.prefix)
            + len(self.last_prefix or self.prefix)
            - len(self.prefix)
            + full * self.fragment_offsets[-1]
            + self.fragment_offsets[rest]
            + len(self.escaped[(self.n - 1) % len(self.fragments)])
            + len(self.last_suffix)
            + len(self.tail)
        )

    def render(self, start: int, stop: int) -> bytes:
        """The bytes of token events ``start`` to ``stop - 1``, with head and tail as due."""
        prefix, fragments, size = self.prefix, self.fragments, len(self.fragments)
        if stop == start + 1 and 0 < start < self.n - 1:  # a paced stream's usual event
            return prefix + fragments[start % size]
        parts = [self.head] if start == 0 else []
        if start == 0 and self.ttft_at >= 0:
            self.first_ns = perf_counter_ns()
        for k in range(start, min(stop, self.n - 1)):
            parts.append(prefix)
            parts.append(fragments[k % size])
        if stop >= self.n:
            last_prefix = self.last_prefix or prefix
            parts += (last_prefix, self.escaped[(self.n - 1) % size], self.last_suffix, self.last())
        return b"".join(parts)

    def last(self) -> bytes:
        """The tail, with the measured TTFT written into its placeholder."""
        if self.ttft_at < 0:
            return self.tail
        at, ttft_ms = self.ttft_at, (self.first_ns - self.arrival_ns) / 1e6
        return self.tail[:at] + fixed_width(ttft_ms) + self.tail[at + TTFT_WIDTH :]


@dataclass(slots=True)
class SuffixEvents(Events):
    """Events whose token text is followed by per-request bytes (ids, created, model)."""

    suffix: bytes = b""  # after each non-final token event's fragment

    def size(self) -> int:
        """The length in bytes of the whole stream."""
        return Events.size(self) + (self.n - 1) * len(self.suffix)

    def render(self, start: int, stop: int) -> bytes:
        """The bytes of token events ``start`` to ``stop - 1``, with head and tail as due."""
        prefix, fragments, suffix = self.prefix, self.fragments, self.suffix
        size = len(fragments)
        if stop == start + 1 and 0 < start < self.n - 1:
            return prefix + fragments[start % size] + suffix
        parts = [self.head] if start == 0 else []
        if start == 0 and self.ttft_at >= 0:
            self.first_ns = perf_counter_ns()
        for k in range(start, min(stop, self.n - 1)):
            parts += (prefix, fragments[k % size], suffix)
        if stop >= self.n:
            last_prefix = self.last_prefix or prefix
            parts += (last_prefix, self.escaped[(self.n - 1) % size], self.last_suffix, self.last())
        return b"".join(parts)
