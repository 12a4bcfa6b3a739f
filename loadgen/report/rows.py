"""The layout of the console summary's blocks: upstream's rows and section titles.

Every row of every block (the "Serving Benchmark Result", the metric blocks, the probes, the
decoding blocks, loadgen's "From intended send time") is ``row``; every title is
``section_title``; every block that closes does so with ``RULE``.
"""

from __future__ import annotations

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
