"""The one output channel: every note, warning and report line that loadgen shows from below
cli/ goes through `logging`, under the ``loadgen`` logger tree; the front end decides how it
looks.

Why `logging` and not a sink object passed in: the lines come from about 25 modules at every
depth of a run (a dataset built in a thread, the server's ready check, the worker fan-out, the
records writer), and a sink would be one more parameter of every function on the way to each.
A module's logger needs none, works from any thread, and a caller of the Python API already
knows how to route it (its own handlers and levels).

- Below cli/, a module takes ``log = logging.getLogger(__name__)`` and writes ``log.info(line)``
  for a note, ``log.warning(line)`` for a warning, the line exactly as it is shown ("warning:"
  included); ``extra=TO_STDERR`` sends a line to standard error (the breached gates, the workers'
  capped warnings). The run's report is one record (``show_report``) that carries its
  ``RunSummary``; ``extra=TABLE`` marks a line that -q keeps as it is (a campaign's table and
  verdict, calibrate's rows and conclusion).
- The ``loadgen`` logger has a NullHandler: used as a library, loadgen prints nothing by itself
  (not even Python's last-resort lines for warnings).
- The CLI (``terminal_output``) writes each record's line as it is, flushed, to stdout or stderr:
  byte for byte what loadgen printed before it had the channel. With -q it shows the report's
  table and verdict, rendered from the summary, and the lines for stderr; the notes are dropped.
- The Python API (``collect_notes``) keeps the notes and warnings for its ``Result`` and passes
  on to the caller's own logging what its levels let through; ``verbose`` shows them as the CLI.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

LOG = logging.getLogger("loadgen")
LOG.addHandler(logging.NullHandler())
_REPORT = logging.getLogger("loadgen.report")

TO_STDERR = {"to_stderr": True}  # extra= of a record whose line goes to standard error
TABLE = {"table": True}  # extra= of a line of a summary that -q shows as it is
SUMMARY = "run_summary"  # the report record's attribute that holds its RunSummary

QuietView = Callable[[Any], list[str]]  # -q's lines from a RunSummary


class Note(NamedTuple):
    """A note or a warning of a run: its level ("info", "warning") and its line as shown."""

    level: str
    text: str


def show_report(lines: list[str], summary: object) -> None:
    """The run's console report, as one record that carries its summary (-q renders from it)."""
    if lines:
        _REPORT.info("\n".join(lines), extra={SUMMARY: summary})


class TerminalHandler(logging.Handler):
    """Each record's line as it is, on stdout (stderr for TO_STDERR), flushed at once. With
    ``quiet``, only the report, as ``quiet`` renders its summary, the TABLE lines and the
    stderr lines."""

    def __init__(self, quiet: QuietView | None = None) -> None:
        super().__init__()
        self.quiet = quiet

    def emit(self, record: logging.LogRecord) -> None:
        try:
            to_stderr = getattr(record, "to_stderr", False)
            if self.quiet is None or to_stderr or getattr(record, "table", False):
                text = record.getMessage()
            elif hasattr(record, SUMMARY):
                text = "\n".join(self.quiet(getattr(record, SUMMARY)))
            else:
                return
            if to_stderr:
                sys.stdout.flush()  # a log of both streams has what stdout holds first
            # Looked up now: the CLI swaps stdout (a broken pipe, click's test runner).
            stream = sys.stderr if to_stderr else sys.stdout
            stream.write(text + "\n")
            stream.flush()
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


@contextlib.contextmanager
def terminal_output(quiet: QuietView | None = None) -> Iterator[None]:
    """While in the block, loadgen's lines go to the terminal as the CLI shows them (only the
    report and the stderr lines with ``quiet``), and nowhere else."""
    with _handled_by([TerminalHandler(quiet)]):
        yield


class _Collector(logging.Handler):
    """Keeps each note and warning (not the report, which the Result holds) and passes on to
    ``forward_to`` the records at ``forward_level`` or above, as the caller's logging would."""

    def __init__(
        self, notes: list[Note], forward_level: int, forward_to: list[logging.Handler]
    ) -> None:
        super().__init__()
        self.notes = notes
        self.forward_level = forward_level
        self.forward_to = forward_to

    def emit(self, record: logging.LogRecord) -> None:
        if not hasattr(record, SUMMARY):
            self.notes.append(Note(record.levelname.lower(), record.getMessage()))
        if record.levelno >= self.forward_level:
            for handler in self.forward_to:
                if record.levelno >= handler.level:
                    handler.handle(record)


@contextlib.contextmanager
def collect_notes(verbose: bool = False) -> Iterator[list[Note]]:
    """The notes and warnings logged in the block, gathered in the list it yields. They are
    shown only where the caller's own logging shows them (its levels and handlers, as they
    were), or, ``verbose``, on the terminal as the CLI shows them. The logger is the process's:
    two runs at once in one process (two threads) would gather each other's notes too."""
    notes: list[Note] = []
    collector = _Collector(notes, LOG.getEffectiveLevel(), _callers_handlers())
    with _handled_by([collector, *([TerminalHandler()] if verbose else [])]):
        yield notes


def _callers_handlers() -> list[logging.Handler]:
    """The handlers a record of the ``loadgen`` logger reaches now: its own, then its
    ancestors' as far as it propagates (none at all: the record is shown nowhere)."""
    found = [h for h in LOG.handlers if not isinstance(h, logging.NullHandler)]
    logger: logging.Logger | None = LOG
    while logger is not None and logger.propagate:
        logger = logger.parent
        if logger is not None:
            found += logger.handlers
    return found


@contextlib.contextmanager
def _handled_by(handlers: list[logging.Handler]) -> Iterator[None]:
    """The ``loadgen`` logger at INFO with only ``handlers`` in the block; then as it was."""
    saved = (LOG.handlers[:], LOG.level, LOG.propagate)
    for handler in saved[0]:
        LOG.removeHandler(handler)
    for handler in handlers:
        LOG.addHandler(handler)
    LOG.setLevel(logging.INFO)
    LOG.propagate = False
    try:
        yield
    finally:
        for handler in handlers:
            LOG.removeHandler(handler)
        for handler in saved[0]:
            LOG.addHandler(handler)
        LOG.setLevel(saved[1])
        LOG.propagate = saved[2]
