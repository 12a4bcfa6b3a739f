"""--plot-timeline and --plot-dataset-stats: upstream's bars, labels and files."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from loadgen.config import parse_itl_thresholds
from loadgen.report.plots import (
    clock,
    itl_labels,
    timeline_segments,
    write_dataset_stats_png,
    write_timeline_html,
)


def test_thresholds_and_labels_are_upstreams() -> None:
    assert parse_itl_thresholds("25, 50") == (0.025, 0.05)
    assert itl_labels((0.025, 0.05)) == ["ITL < 25ms", "25ms ≤ ITL < 50ms", "ITL ≥ 50ms"]
    with pytest.raises(ValueError, match="Expected 2 ITL threshold values, got 1"):
        parse_itl_thresholds("25")
    assert clock(3725.5) == "01:02:05.500"


def test_segments_follow_each_request_from_its_send() -> None:
    segments = timeline_segments(
        start_s=np.array([10.0, 10.5]),
        ttft_s=np.array([0.2, 0.0]),
        itls_s=[[0.01, 0.03, 0.06], []],  # the second request failed: a 0 s TTFT bar only
        prompt_lens=np.array([7, 9]),
        output_lens=np.array([4, 0]),
        thresholds_s=(0.025, 0.05),
    )
    first = [s for s in segments if s["request_id"] == "Req 0"]
    assert [s["type"] for s in first] == [
        "TTFT", "ITL < 25ms", "25ms ≤ ITL < 50ms", "ITL ≥ 50ms",
    ]  # fmt: skip
    assert [(s["start"], s["end"]) for s in first] == [
        ("00:00:00.000", "00:00:00.200"),
        ("00:00:00.200", "00:00:00.210"),
        ("00:00:00.210", "00:00:00.240"),
        ("00:00:00.240", "00:00:00.300"),
    ]
    assert first[0]["req_finish_time"] == "00:00:00.300"  # TTFT plus the ITLs, as upstream
    assert (first[0]["prompt_tokens"], first[0]["output_tokens"]) == (7, 4)
    second = [s for s in segments if s["request_id"] == "Req 1"]
    assert [(s["type"], s["start"], s["duration"]) for s in second] == [
        ("TTFT", "00:00:00.500", "0.000s")
    ]


def test_files_are_written(tmp_path: Path) -> None:
    segments = timeline_segments(
        np.array([0.0, 0.1]), np.array([0.05, 0.06]), [[0.01], [0.07]],
        np.array([3, 4]), np.array([2, 2]), (0.025, 0.05),
    )  # fmt: skip
    write_timeline_html(segments, tmp_path / "t.html", (0.025, 0.05))
    html = (tmp_path / "t.html").read_text()
    assert "plotly" in html and "Req 1" in html and "ITL ≥ 50ms" in html
    write_dataset_stats_png(np.array([3, 4, 5]), np.array([2, 2, 1]), tmp_path / "d.png")
    assert (tmp_path / "d.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
