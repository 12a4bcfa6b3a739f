"""How many calls to keep in flight to a server whose capacity is unknown: AIMD on latency.

The server tokenizer's ``/tokenize`` and ``/detokenize`` calls start a few at a time. The limit
grows by one for every ``limit`` quick answers and halves on a broken connection or a slow
answer. A server with a fixed pool of HTTP threads (llama.cpp) does not slow down gradually: the
call one past its pool waits seconds for a thread while later calls are answered at once. So a
slow call that later calls overtook also sets a ceiling just below the number in flight when it
was sent; a slowdown of every call (a pause of the whole server) only halves the limit. A call
still in flight past the slow threshold counts as slow at once, so the limit stops growing while
it waits.

Pure bookkeeping on times the caller passes in; ``loadgen.server.tokenizer`` drives it.
"""

from __future__ import annotations

INITIAL = 4
MAXIMUM = 64
# An answer is slow when it takes SLOW_FACTOR times the fastest answer seen and SLOW_MARGIN_S
# more than it; before any answer, when it takes FIRST_SLOW_S.
SLOW_FACTOR = 4.0
SLOW_MARGIN_S = 0.1
FIRST_SLOW_S = 1.0


class AdaptiveLimit:
    """An AIMD concurrency limit: grow while answers stay quick, shrink on errors or slowness."""

    def __init__(
        self,
        initial: int = INITIAL,
        maximum: int = MAXIMUM,
        minimum: int = 1,
        slow_factor: float = SLOW_FACTOR,
        slow_margin_s: float = SLOW_MARGIN_S,
    ) -> None:
        if not 1 <= minimum <= initial <= maximum:
            raise ValueError(
                f"need 1 <= minimum <= initial <= maximum, got {minimum}, {initial}, {maximum}"
            )
        self.limit = initial
        self.ceiling = maximum
        self.minimum = minimum
        self.slow_factor = slow_factor
        self.slow_margin_s = slow_margin_s
        self.fastest_s: float | None = None
        self.decreases = 0
        self._flights: dict[int, tuple[float, int]] = {}  # ticket -> (start, in flight then)
        self._next_ticket = 0
        self._calm_from = 0  # calls sent before the last decrease cannot cause another
        self._quick = 0
        self._last_quick = -1  # the latest-sent call answered quickly

    @property
    def in_flight(self) -> int:
        """Calls started and not yet finished."""
        return len(self._flights)

    @property
    def slow_s(self) -> float:
        """The latency above which an answer counts as slow."""
        if self.fastest_s is None:
            return FIRST_SLOW_S
        return max(self.slow_factor * self.fastest_s, self.fastest_s + self.slow_margin_s)

    def can_start(self, now: float) -> bool:
        """Whether another call may start now (a call found stuck first shrinks the limit)."""
        self._check_stuck(now)
        return self.in_flight < self.limit

    def start(self, now: float) -> int:
        """Record a call sent at ``now``; return its ticket."""
        ticket = self._next_ticket
        self._next_ticket += 1
        self._flights[ticket] = (now, len(self._flights) + 1)
        return ticket

    def answered(self, ticket: int, now: float) -> None:
        """The call answered at ``now``: quick answers grow the limit, a slow one shrinks it."""
        started, in_flight_then = self._flights.pop(ticket)
        latency = now - started
        if latency > self.slow_s:
            if ticket >= self._calm_from:
                self._slow(ticket, in_flight_then)
        else:
            self._last_quick = max(self._last_quick, ticket)
            self._quick += 1
            if self._quick >= self.limit and self.limit < self.ceiling and not self._stuck(now):
                self.limit += 1
                self._quick = 0
        self.fastest_s = latency if self.fastest_s is None else min(self.fastest_s, latency)

    def failed(self, ticket: int, now: float) -> None:
        """The call's connection broke: halve the limit (once per round of calls)."""
        del self._flights[ticket]
        if ticket >= self._calm_from:
            self._decrease(ceiling=None)

    def released(self, ticket: int, now: float) -> None:
        """The call ended otherwise (an error answer, a cancellation): only its slot is freed."""
        del self._flights[ticket]

    def _stuck(self, now: float) -> tuple[int, int] | None:
        """(ticket, in flight when sent) of the oldest call sent since the last decrease that
        has been waiting longer than ``slow_s``, if any."""
        slow_s = self.slow_s
        for ticket, (started, in_flight_then) in self._flights.items():  # oldest first
            if ticket >= self._calm_from:
                return (ticket, in_flight_then) if now - started > slow_s else None
        return None

    def _check_stuck(self, now: float) -> None:
        if stuck := self._stuck(now):
            self._slow(*stuck)

    def _slow(self, ticket: int, in_flight_then: int) -> None:
        overtaken = self._last_quick > ticket
        self._decrease(ceiling=in_flight_then - 1 if overtaken else None)

    def _decrease(self, ceiling: int | None) -> None:
        if ceiling is not None:
            self.ceiling = max(self.minimum, min(self.ceiling, ceiling))
        self.limit = max(self.minimum, min(self.limit // 2, self.ceiling))
        self._quick = 0
        self._calm_from = self._next_ticket
        self.decreases += 1
