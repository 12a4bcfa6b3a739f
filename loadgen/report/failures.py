"""Why requests did not complete: each request's outcome, the failures counted by kind, and the
console's lines that say so.

A request that did not complete is one of three, told apart by how its worker's error begins
(``workers/protocol.py``'s prefixes, the same since the first records files):

- **not sent**: it never left the client (``not sent: ...``): the run stopped (Ctrl-C, a
  signal, fail fast, a time limit) before its turn, or an earlier turn of its conversation
  failed (``--multi-turn``);
- **cancelled**: it was in flight when the run stopped (``cancelled: ...``): the client cut it;
- **failed**: every other request that did not succeed: the server's or the network's error,
  a timeout, a request its worker never reported (``lost: ...``).

Upstream's ``failed`` (the console's "Failed requests:", the result JSON's key) counts the
failed alone: upstream writes no result for a stopped run, so its failures are all of this kind.
A failure's kind is its error's first words before any colon (``HTTP 500 Internal Server
Error``), made printable and capped, since it may be a server's text. Pure functions.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import numpy as np

from loadgen.terminal import printable
from workers.protocol import CANCELLED_PREFIX, NOT_SENT_PREFIX

# Each request's outcome, as an index into OUTCOMES (the per-request exports' ``outcome``).
COMPLETED, FAILED, CANCELLED, NOT_SENT = range(4)
OUTCOMES = ("completed", "failed", "cancelled", "not_sent")
ERROR_KIND_WORDS = 5  # an error's kind: at most its first 5 words before a colon
ERROR_KIND_CHARS = 80  # and at most 80 characters of them (a server's word can be long)
KINDS_LISTED = 5  # the console names the 5 most frequent kinds, then counts the rest


def error_outcome(error: str) -> int:
    """The outcome of a request that did not succeed, from its error: NOT_SENT, CANCELLED or
    FAILED."""
    if error.startswith(NOT_SENT_PREFIX):
        return NOT_SENT
    if error.startswith(CANCELLED_PREFIX):
        return CANCELLED
    return FAILED


def outcomes(success: np.ndarray, errors: Sequence[str]) -> np.ndarray:
    """Each request's outcome (int8, an index into OUTCOMES) from its success and its error
    ("" where it had none)."""
    out = np.full(len(success), COMPLETED, dtype=np.int8)
    for i in np.flatnonzero(~np.asarray(success, dtype=bool)).tolist():
        out[i] = error_outcome(errors[i])
    return out


def error_kind(error: str) -> str:
    """The first words of an error, before any colon, printable and capped: its kind for the
    counts (the summary's, the live view's, report.html's)."""
    head = error.split(":", 1)[0]
    kind = printable(" ".join(head.split()[:ERROR_KIND_WORDS])) or "(empty)"
    if len(kind) > ERROR_KIND_CHARS:
        return kind[: ERROR_KIND_CHARS - 1] + "…"
    return kind


def kinds_of_failed(outcome: np.ndarray, errors: Sequence[str]) -> dict[str, int]:
    """The failed requests (not the cancelled or not sent) counted by kind: the counts add up
    to the run's ``failed``."""
    return dict(Counter(error_kind(errors[i]) for i in np.flatnonzero(outcome == FAILED).tolist()))


def most_frequent(by_kind: Mapping[str, int]) -> list[tuple[str, int]]:
    """Error kinds and their counts, most frequent first, then by name: the order every view
    lists them in."""
    return sorted(by_kind.items(), key=lambda kind: (-kind[1], kind[0]))


def counts_line(failed: int, cancelled: int, not_sent: int) -> str:
    """How many requests did not complete and why, in one line ("" when all completed)."""
    parts = [
        *([f"{failed:,} failed"] if failed else []),
        *([f"{cancelled:,} cancelled (in flight when the run stopped)"] if cancelled else []),
        *([f"{not_sent:,} not sent (they never left the client)"] if not_sent else []),
    ]
    return "requests not completed: " + ", ".join(parts) if parts else ""


def kinds_line(by_kind: Mapping[str, int], listed: int = KINDS_LISTED) -> str:
    """The failed requests by kind in one line, most frequent first ("" without)."""
    kinds = most_frequent(by_kind)
    if not kinds:
        return ""
    shown = [f"{count:,} × {kind}" for kind, count in kinds[:listed]]
    rest = kinds[listed:]
    if rest:
        shown.append(f"{sum(n for _, n in rest):,} × {len(rest)} other kind(s)")
    return "failed requests by kind: " + ", ".join(shown)


def failure_lines(
    by_kind: Mapping[str, int], failed: int, cancelled: int, not_sent: int
) -> list[str]:
    """The console's lines after upstream's table on the requests that did not complete:
    the kinds of the failed, and the counts where some were cancelled or not sent (a run that
    only failed has its count in upstream's table already); none when all completed."""
    lines = [kinds_line(by_kind)]
    if cancelled or not_sent:
        lines.append(counts_line(failed, cancelled, not_sent))
    return [line for line in lines if line]
