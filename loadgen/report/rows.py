"""The layout of the console summary's blocks: upstream's rows and section titles.

Every row of every block (the "Serving Benchmark Result", the metric blocks, the probes, the
decoding blocks, loadgen's "From intended send time") is ``row``; every title is
``section_title``; every block that closes does so with ``RULE``.
"""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 50  # upstream's block width
RULE = "=" * WIDTH  # the line that closes a block


def row(label: str, value: object, spec: str = "") -> str:
    """``label`` left-aligned in 40 columns, a space, then ``value`` left-aligned in 10 with the
    format type ``spec`` (``".2f"`` for upstream's float rows, ``""`` for counts):
    upstream's ``"{:<40} {:<10.2f}"`` and ``"{:<40} {:<10}"``."""
    return f"{label:<40} {value:<10{spec}}"


def section_title(text: str, fill: str = "-") -> str:
    """``text`` centred in a line of ``fill`` as wide as a block: upstream's
    ``"{s:{c}^{n}}".format(s=text, n=50, c=fill)``."""
    return f"{text:{fill}^{WIDTH}}"


Row = tuple[str, object, str]  # label, value, format spec: one ``row``


@dataclass(frozen=True)
class Block:
    """One block of the summary: its title (``section_title`` with ``fill``), then its items,
    each a ``Row`` or a line of text as it is. The console prints it (``block_lines``);
    report.html makes a table of it."""

    title: str
    items: tuple[Row | str, ...]
    fill: str = "-"

    def rows(self) -> list[Row]:
        """The block's rows, without its lines of text."""
        return [item for item in self.items if not isinstance(item, str)]


def block_lines(block: Block) -> list[str]:
    """A block as the console prints it: its title line, then a line per item."""
    lines = [section_title(block.title, block.fill)]
    lines += [item if isinstance(item, str) else row(*item) for item in block.items]
    return lines
