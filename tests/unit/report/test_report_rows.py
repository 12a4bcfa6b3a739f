"""``loadgen.report.rows``: the one row formatter and section title of the summary blocks."""

from __future__ import annotations

import numpy as np

from loadgen.report.rows import RULE, WIDTH, row, section_title


def test_row_is_upstreams_40_and_10_column_layout() -> None:
    assert row("Successful requests:", 42) == "Successful requests:" + " " * 20 + " 42" + " " * 8
    assert row("Benchmark duration (s):", 1.23456, ".2f") == "{:<40} {:<10.2f}".format(
        "Benchmark duration (s):", 1.23456
    )
    assert row("Drafts:", 7, "d") == "{:<40} {:<10d}".format("Drafts:", 7)
    assert row("Peak concurrent requests:", 3, ".2f").endswith(" 3.00      ")


def test_row_does_not_cut_what_is_wider_than_its_columns() -> None:
    label = "x" * 45
    assert row(label, 12345678901234) == f"{label} 12345678901234"
    assert row("n:", np.int64(5)) == "{:<40} {:<10}".format("n:", 5)


def test_section_title_centres_text_in_the_block_width() -> None:
    assert section_title(" Serving Benchmark Result ", "=") == (
        "============ Serving Benchmark Result ============"
    )
    assert section_title("Probe Requests") == "{s:{c}^{n}}".format(s="Probe Requests", n=50, c="-")
    assert len(section_title("Time to First Token")) == WIDTH
    assert section_title("", "=") == RULE == "=" * 50
