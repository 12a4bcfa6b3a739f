"""Fail fast: stop a run whose first requests all fail the same way, and say why in one line.

A wrong ``--endpoint`` for the backend, a model the server does not serve or a missing API
key fail every request with the same 4xx. Sending all of them and printing a table of zeros
helps nobody: once the first ``FIRST`` finished requests (or all of a smaller run) failed with
one status and one message, the run stops and names the cause and the likely fix.
``--no-fail-fast`` turns this off. 408 and 429 are the server's load talking, not a mistake in
the command, so they never stop a run.
"""

from __future__ import annotations

import numpy as np

from loadgen.backends import COMPLETIONS_BACKENDS
from loadgen.fleet.collector import BatchObserver, RecordBatch
from loadgen.terminal import printable

FIRST = 20
NOT_MISTAKES = (408, 429)  # timeouts and rate limits: load, not the command line


class FirstFailures:
    """Watches the first finished requests; ``stop`` says whether they all failed alike."""

    def __init__(self, num_requests: int) -> None:
        self.needed = min(FIRST, num_requests)
        self.seen = 0
        self.same: tuple[int, str] | None = None  # (status, error) while all alike
        self.alike = True

    def observe(self, rows: np.ndarray, errors: dict[int, str]) -> bool:
        """Take a batch of finished requests (RECORD_DTYPE rows); True once the first
        ``needed`` of them all failed with the same 4xx and message."""
        for row in rows[: max(0, self.needed - self.seen)]:
            self.seen += 1
            status = int(row["status"])
            failure = (status, errors.get(int(row["index"]), ""))
            mistake = 400 <= status < 500 and status not in NOT_MISTAKES and not row["success"]
            if not mistake or (self.same is not None and failure != self.same):
                self.alike = False
            self.same = failure
        return self.alike and self.seen >= self.needed > 0

    @property
    def judged(self) -> bool:
        """Whether the run's first requests have been judged: all seen, or one unlike the rest."""
        return not self.alike or self.seen >= self.needed

    def stop_line(self, backend: str, endpoint: str, model: str) -> str:
        """The one line of a stopped run: what failed, how often, and the likely fix."""
        assert self.same is not None
        status, error = self.same
        first = printable(error.splitlines()[0]) if error else f"HTTP {status}"
        fix = likely_fix(status, error, backend, endpoint, model)
        # The server's words and its model's name: printable, so nothing acts on the terminal.
        return printable(
            f"the first {self.seen} requests all failed with {first!r}; stopped "
            f"(--no-fail-fast sends them all). {fix}"
        )


class FailFast(BatchObserver):
    """Fail fast as the run's stop rule, in front of the records file (``then``): the first
    requests are judged before ``then`` sees them (a run of failures stops within
    milliseconds of the FIRST-th, before the file spends anything on them), and once they are
    judged every batch goes on to ``then`` as it arrives."""

    def __init__(self, num_requests: int, then: BatchObserver) -> None:
        self.first = FirstFailures(num_requests)
        self.then = then
        self.held: list[RecordBatch] | None = []  # None once the first requests are judged
        self.stopped = False  # whether it stopped the run

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run starts: so does ``then``."""
        self.then.start(t0_ns, t0_wall, connections)

    def batch(self, batch: RecordBatch) -> bool:
        """Judge the batch while the first requests are, then hand it on; True when the
        first requests all failed alike."""
        if self.held is None:
            return self.then.batch(batch)
        self.held.append(batch)
        self.stopped = self.first.observe(batch.rows, batch.errors)
        if self.first.judged:
            self._release()
        return self.stopped

    def end(self) -> None:
        """The records are all in: the batches held so far go on, then ``then`` ends."""
        self._release()
        self.then.end()

    def _release(self) -> None:
        for held in self.held or ():
            self.then.batch(held)
        self.held = None

    def stop_line(self, backend: str, endpoint: str, model: str) -> str:
        """The one line of a run it stopped (FirstFailures.stop_line)."""
        return self.first.stop_line(backend, endpoint, model)


def likely_fix(status: int, error: str, backend: str, endpoint: str, model: str) -> str:
    """The likely cause of a 4xx that every request gets, as a hint."""
    text = error.lower()
    if status in (401, 403):
        return "Check the API key: OPENAI_API_KEY, or --header Authorization=Bearer <key>."
    if "model" in text and ("not found" in text or "does not exist" in text or status == 404):
        return f"Is --model {model} served? GET /v1/models lists the server's models."
    if status in (404, 405):
        chat = (
            " (a chat-only server: --backend openai-chat)"
            if backend in COMPLETIONS_BACKENDS
            else ""
        )
        return f"Does the server serve {endpoint}? Check --endpoint and --base-url{chat}."
    if status in (400, 422):
        return (
            "The server refused the request body: check --backend, --extra-body and the "
            "sampling flags."
        )
    return "The server's message says why."
