"""``-q/--quiet``: standard output that lets through only the report, from the summary table's
title to the client's verdict, and drops every other line (progress notes, warnings, the
paths written). Errors go to stderr, which is left alone.

A filter on the stream rather than a flag read by every print: the lines before the summary come
from many phases of a run, and the report itself is printed the same way with or without it.
"""

from __future__ import annotations

import io
from typing import TextIO

from loadgen.report.summary import SUMMARY_TITLE
from loadgen.report.verdict import VERDICT_HEADS


class ReportOnlyStdout(io.TextIOBase):
    """Writes through to ``stream`` the whole lines from SUMMARY_TITLE to the verdict line,
    inclusive; drops the rest."""

    def __init__(self, stream: TextIO | io.TextIOBase) -> None:
        self.stream = stream
        self.partial = ""  # a line written in pieces (print writes the newline apart)
        self.in_report = False

    def write(self, text: str) -> int:
        *lines, self.partial = (self.partial + text).split("\n")
        for line in lines:
            if self.keeps(line):
                self.stream.write(line + "\n")
        return len(text)

    def keeps(self, line: str) -> bool:
        """Whether ``line`` belongs to the report (and move past its end)."""
        if line == SUMMARY_TITLE:
            self.in_report = True
        kept = self.in_report
        if self.in_report and line.startswith(VERDICT_HEADS):
            self.in_report = False
        return kept

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        return self.stream.isatty()

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding
