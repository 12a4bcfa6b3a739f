"""Progress that suits where stderr goes: tqdm's bar on a terminal; off one (a log file, a CI
job, a pipe), a plain line every ``PLAIN_EVERY_S`` through the output channel, so that no
carriage returns or cursor codes reach the file and a log still shows the work going on."""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

from tqdm import tqdm

from loadgen.console import TO_STDERR

log = logging.getLogger(__name__)

PLAIN_EVERY_S = 10.0  # a line per 10 s keeps a long build visible and a log short


def on_terminal() -> bool:
    """Whether stderr, where progress goes, is a terminal that can redraw a bar."""
    return sys.stderr.isatty()


class PlainProgress:
    """A count shown as plain lines, ``desc: n/total unit, T s``, at most every PLAIN_EVERY_S;
    the part of tqdm's interface the bars here use (``n``, ``total``, ``update``, ``refresh``,
    ``write``, ``close``)."""

    def __init__(self, desc: str, unit: str, started: float | None = None) -> None:
        self.desc = desc
        self.unit = unit
        self.n = 0
        self.total: int | None = None
        self.started = time.monotonic() if started is None else started
        self.said_at = self.started

    def update(self, n: int = 1) -> None:
        """Count ``n`` more, and say so if a line is due."""
        self.n += n
        self.refresh()

    def refresh(self) -> None:
        """Say the count if PLAIN_EVERY_S have passed since the last line (or the start)."""
        now = time.monotonic()
        if now - self.said_at >= PLAIN_EVERY_S:
            self.said_at = now
            log.info(self.line(now), extra=TO_STDERR)

    def line(self, now: float) -> str:
        """The progress line at ``now``."""
        count = f"{self.n:,}" if self.total is None else f"{self.n:,}/{self.total:,}"
        return f"{self.desc}: {count}{self.unit}, {now - self.started:.0f} s"

    def write(self, line: str) -> None:
        """A line of its own, where the progress lines go."""
        log.info(line, extra=TO_STDERR)

    def close(self) -> None:
        """Nothing to clear: the lines stay in the log."""


def progress_bar(desc: str, unit: str, *, delay_s: float, enabled: bool) -> Any:
    """A counting bar: tqdm on a terminal (after ``delay_s``), plain lines off one, none when
    not ``enabled`` (a disabled tqdm, so the caller's calls stay the same)."""
    if enabled and not on_terminal():
        return PlainProgress(desc, unit)
    return tqdm(desc=desc, unit=unit, delay=delay_s, disable=not enabled)
