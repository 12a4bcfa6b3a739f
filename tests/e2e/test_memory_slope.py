"""A --duration run's coordinator holds the same memory at its end as after its first seconds:
nothing per request grows with the run (each request's schedule offset, lengths, worker and
whether one reported it are held a block at a time, let go once the block is answered; a few
numbers per block remain), nor its rows (the records file keeps them, read back at the end)
nor its token events.

The short form of ``scripts/bench/soak_memory.py``'s hour: a real run (real CLI, workers and
mock server) whose coordinator is this process, its Python-visible memory read with tracemalloc
at every line of the live view, and the growth between two lines set against the requests that
finished between them. tracemalloc counts allocations, not pages, so the figure does not move
with a busy machine. With the token events kept in memory (the regression the issue was about)
the same run grows by their 8 bytes each, 400 a request.
"""

from __future__ import annotations

import tracemalloc
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from helpers import run_in_process

from loadgen.fleet import collector
from loadgen.session import live_view

EVENTS_PER_REQUEST = 400
RUN = ["--mock", "--mock-itl-ms", "1", "--workers", "2", "--random-input-len", "16",
       "--random-output-len", str(EVENTS_PER_REQUEST), "--ignore-eos", "--request-rate", "50",
       "--duration", "10s", "--duration-block", "128", "--no-save-records"]  # fmt: skip
# Bytes a finished request may add to the coordinator's traced memory: none is kept per
# request, and what a block leaves (a few numbers) is lost in the +-50 KB of the blocks of
# prompts that come and go (measured with each row kept too: -105 and -81 bytes a request;
# 3,429 with the events kept).
ROW_BYTES_BOUND = 1000


@pytest.fixture
def traced() -> Iterator[None]:
    tracemalloc.start()
    try:
        yield
    finally:
        tracemalloc.stop()


def growth_per_request(monkeypatch: pytest.MonkeyPatch, result_dir: Path) -> float:
    """The run's traced bytes per finished request, from the view's lines after its first 2 s."""
    samples: list[tuple[float, int, int]] = []  # elapsed s, finished, traced bytes
    real_line = live_view.plain_line

    def plain_line(figures: live_view.LiveFigures) -> str:
        if figures.run_s is None:  # the final line: the run's teardown has begun
            held = tracemalloc.get_traced_memory()[0]
            samples.append((figures.elapsed_s, figures.finished, held))
        return real_line(figures)

    monkeypatch.setattr(live_view, "plain_line", plain_line)
    monkeypatch.setattr(live_view, "PLAIN_EVERY_S", 0.5)
    proc = run_in_process(*RUN, "--result-dir", str(result_dir))
    assert proc.returncode == 0, proc.stderr
    steady = [(finished, held) for elapsed, finished, held in samples if elapsed >= 2.0]
    assert len(steady) >= 6, samples  # lines over at least 3 s of the run
    finished, held = np.array(steady, dtype=float).T
    assert finished[-1] - finished[0] >= 100, samples
    return float(np.polyfit(finished, held, 1)[0])


def test_the_coordinator_grows_by_a_row_per_request_not_by_its_events(
    traced: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    per_request = growth_per_request(monkeypatch, tmp_path)
    assert per_request < ROW_BYTES_BOUND, f"{per_request:.0f} bytes per request"


def test_the_bound_catches_events_kept_in_memory(
    traced: None, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    real_init = collector.Collector.__init__

    def keeping(
        self: collector.Collector, workers: list[int], owner: np.ndarray, *_: object, **__: object
    ) -> None:
        real_init(self, workers, owner, rows_in_file=False)

    monkeypatch.setattr(collector.Collector, "__init__", keeping)
    per_request = growth_per_request(monkeypatch, tmp_path)
    assert per_request > 8 * EVENTS_PER_REQUEST * 0.8, f"{per_request:.0f} bytes per request"
    assert per_request > 2 * ROW_BYTES_BOUND
