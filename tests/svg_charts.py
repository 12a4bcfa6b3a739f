"""report.html's charts read back for tests: each inline ``<svg>``'s title and legend labels,
as the page draws them (loadgen/report/html_svg.py)."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

_SVG = re.compile(r"<svg\b.*?</svg>", re.S)
_TITLE = re.compile(r'<text[^>]*class="title plot_title"[^>]*>([^<]*)</text>')
_LEGEND = re.compile(r'class="legend reactive activate-serie">.*?<text[^>]*>([^<]*)</text>', re.S)


@dataclass(frozen=True)
class Chart:
    """One chart of a page: its title and the labels of its legend."""

    title: str
    legend: list[str]
    svg: str


def charts(page: str) -> list[Chart]:
    """The page's charts, in its order."""
    found = []
    for match in _SVG.finditer(page):
        svg = match.group()
        title = _TITLE.search(svg)
        found.append(Chart(html.unescape(title[1]) if title else "",
                           [html.unescape(t) for t in _LEGEND.findall(svg)], svg))  # fmt: skip
    return found


def details(page: str) -> list[tuple[str, str]]:
    """A campaign's over-time sections: each ``<details>``' summary and its body."""
    return [
        (html.unescape(summary), body)
        for summary, body in re.findall(
            r"<details[^>]*><summary>(.*?)</summary>(.*?)</details>", page, re.S
        )
    ]
