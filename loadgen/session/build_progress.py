"""The dataset build's progress line on stderr: nothing for a build that takes under a second,
then the prompts built so far (or, for a dataset that does not count them, the time so far)
until the build ends, when the line is cleared. Off a terminal, a plain line every 10 s instead
(loadgen/progress_bar.py), which stays.

The build runs in a thread and only stores its count; the run's event loop draws the line, so
tqdm is used from one thread only.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Awaitable
from typing import TypeVar

from tqdm import tqdm

from loadgen.progress_bar import PlainProgress, on_terminal

T = TypeVar("T")

SHOW_AFTER_S = 1.0  # a shorter build is not worth a line
TICK_S = 0.2
COUNTED = "{desc}: {percentage:3.0f}% {bar:20} {n_fmt}/{total_fmt} prompts [{elapsed}<{remaining}]"
UNCOUNTED = "{desc}: {elapsed}"


class BuildProgress:
    """What a build reported (``report``, from its thread) and the line that shows it."""

    def __init__(self, description: str, disabled: bool) -> None:
        self.description = description
        self.disabled = disabled
        self.done = 0
        self.total: int | None = None
        self.bar: tqdm | PlainProgress | None = None

    def report(self, done: int, total: int) -> None:
        """The build's count: ``done`` of ``total`` prompts (called from the building thread)."""
        self.done, self.total = done, total

    async def show_while(self, build: Awaitable[T]) -> T:
        """Await ``build``, drawing the line every TICK_S once SHOW_AFTER_S have passed."""
        if self.disabled:
            return await build
        started = time.monotonic()
        task = asyncio.ensure_future(build)
        try:
            while not task.done():
                await asyncio.wait({task}, timeout=TICK_S)
                if not task.done() and time.monotonic() - started >= SHOW_AFTER_S:
                    self._draw(started)
            return task.result()
        finally:
            task.cancel()
            if self.bar is not None:
                self.bar.close()

    def _draw(self, started: float) -> None:
        if self.bar is None:
            self.bar = self._new_bar(started)
        total = self.total
        if total is not None:
            if isinstance(self.bar, tqdm):
                self.bar.bar_format = COUNTED
            self.bar.total = total
            self.bar.n = self.done
        self.bar.refresh()

    def _new_bar(self, started: float) -> tqdm | PlainProgress:
        if not on_terminal():
            return PlainProgress(self.description, " prompts", started=started)
        bar = tqdm(desc=self.description, file=sys.stderr, leave=False, bar_format=UNCOUNTED)
        bar.start_t -= time.monotonic() - started  # its clock counts from the start
        return bar
