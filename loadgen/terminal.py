"""What reaches a terminal or a log from outside: text made safe to print, warnings capped.

Server error texts, model names and remote host names come from peers loadgen does not trust.
Printed raw, an ANSI colour, an OSC title or a BEL would act on the user's terminal, and a
newline would forge a line of loadgen's own output. ``printable`` keeps the text and drops what
a terminal would act on. ``CappedWarnings`` prints the first few warnings of one kind, then
counts the rest, so a misbehaving peer cannot flood the output.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable

from loadgen.console import TO_STDERR

log = logging.getLogger(__name__)

# An escape sequence: CSI (ESC [ ... final byte), OSC (ESC ] ... BEL or ESC \), other
# two-byte ESC sequences; then any lone C0 control, DEL or C1 control left over.
_ESCAPE = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]?"  # CSI
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"  # OSC, ended by BEL or ST (or cut short)
    r"|\x1b[@-_]?"  # other escapes, or a lone ESC
    r"|\x9b[0-?]*[ -/]*[@-~]?"  # 8-bit CSI
    r"|\x9d[^\x07\x9c]*(?:\x07|\x9c)?"  # 8-bit OSC
)
_WHITESPACE_CONTROLS = re.compile(r"[\t\n\r\v\f]+")
_OTHER_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f]")

WARNINGS_PER_KIND = 5  # printed of each kind; the rest are counted


def printable(text: object) -> str:
    """``text`` as one line a terminal only displays: escape sequences and control
    characters removed, tabs and line breaks made single spaces."""
    text = str(text)
    if text.isprintable():
        return text
    text = _ESCAPE.sub("", text)
    text = _WHITESPACE_CONTROLS.sub(" ", text)
    return _OTHER_CONTROLS.sub("", text)


def _to_stderr(line: str) -> None:
    """A warning for stderr, through the output channel (loadgen/console.py)."""
    log.warning(line, extra=TO_STDERR)


class CappedWarnings:
    """Warnings printed ``per_kind`` times per kind, then counted (``flush`` prints the counts)."""

    def __init__(
        self, per_kind: int = WARNINGS_PER_KIND, sink: Callable[[str], None] = _to_stderr
    ) -> None:
        self.per_kind = per_kind
        self.sink = sink
        self.counts: dict[str, int] = {}

    def warn(self, kind: str, message: str) -> bool:
        """Print ``warning: MESSAGE`` (made printable) unless ``kind`` has had its share;
        return whether it was printed."""
        seen = self.counts.get(kind, 0) + 1
        self.counts[kind] = seen
        if seen > self.per_kind:
            return False
        suffix = " (further warnings of this kind are counted)" if seen == self.per_kind else ""
        self.sink(f"warning: {printable(message)}{suffix}")
        return True

    def unprinted(self, kind: str) -> int:
        """How many warnings of ``kind`` were counted, not printed."""
        return max(0, self.counts.get(kind, 0) - self.per_kind)

    def flush(self) -> None:
        """One line per kind that had warnings counted and not printed."""
        for kind, seen in self.counts.items():
            if seen > self.per_kind:
                self.sink(f"warning: {seen - self.per_kind} more {kind} not shown ({seen} in all)")
