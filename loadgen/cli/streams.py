"""Standard output that outlives its reader, so a run's results are never lost to it; and
``show_output``, which puts loadgen's lines (loadgen/console.py) on the terminal for a command.

Ctrl-C under ``loadgen run ... | tee log`` reaches tee too: it exits, and every later write to
stdout fails with EPIPE. The run still has its summary to finish and its files to write.
"""

from __future__ import annotations

import io
import os
from typing import TextIO

import click

from loadgen.console import QuietView, terminal_output


def show_output(quiet: QuietView | None = None) -> None:
    """Until the current command ends, loadgen's notes, warnings and reports go to stdout and
    stderr as plain lines (with ``quiet``, only the report as it renders it, and stderr's)."""
    click.get_current_context().with_resource(terminal_output(quiet))


class SurvivingStdout(io.TextIOBase):
    """Writes through to ``stream`` until its pipe breaks, then to /dev/null: printing never
    raises BrokenPipeError, so the run goes on to write its result and records files."""

    def __init__(self, stream: TextIO) -> None:
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            return self.stream.write(text)
        except BrokenPipeError:
            self._to_devnull()
            return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except BrokenPipeError:
            self._to_devnull()

    def fileno(self) -> int:
        return self.stream.fileno()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    def _to_devnull(self) -> None:
        """Point the stream's file descriptor at /dev/null: what it still holds, and what
        comes later, is dropped instead of failing."""
        devnull = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(devnull, self.stream.fileno())
        finally:
            os.close(devnull)
