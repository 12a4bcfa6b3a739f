"""The scrape loop without sockets: a client that answers pages or fails as a test says, the
samples stamped on the run's clock and chunked, one note for failures, back-off, then a stop."""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

import pytest

from loadgen.server import scraper as scraping
from loadgen.server.client import Answer
from loadgen.server.errors import ServerUnreachable
from loadgen.server.scraper import MAX_FAILURES, Scraper, Scrapers

URL = "http://127.0.0.1:8000/metrics"


class FakeClient:
    """Answers each GET with the next of ``pages`` (an exception is raised instead)."""

    def __init__(self, pages: list[Any]) -> None:
        self.pages = pages
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def send(self, method: str, url: str, **kwargs: Any) -> Answer:
        self.sent.append((url, kwargs))
        page = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        if isinstance(page, Exception):
            raise page
        now = time.perf_counter_ns()
        return Answer(200, {}, [(now, page.encode())], now - 1000, now + 1000)


def run_for(scraper: Scraper, seconds: float) -> int:
    """Run the scraper from t0 = now for ``seconds``; t0."""

    async def main() -> int:
        stop = asyncio.Event()
        t0 = time.perf_counter_ns()
        task = asyncio.create_task(scraper.run(t0, stop))
        await asyncio.sleep(seconds)
        stop.set()
        await task
        return t0

    return asyncio.run(main())


def test_samples_on_the_runs_clock_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scraping, "CHUNK_SCRAPES", 3)
    chunks: list[dict] = []
    client = FakeClient(["vllm:num_requests_running 2\n"])
    scraper = Scraper(client, URL, interval_s=0.01, sink=chunks.append)  # type: ignore[arg-type]
    run_for(scraper, 0.2)
    assert len(scraper.t_ns) >= 4
    assert all(0 <= t < 1e9 for t in scraper.t_ns)
    assert scraper.t_ns == sorted(scraper.t_ns)
    assert sum(len(c["t_ns"]) for c in chunks) == len(scraper.t_ns)  # all flushed at the end
    assert all(len(c["t_ns"]) <= 3 for c in chunks)
    assert chunks[0]["series"][0]["name"] == "requests_running"
    # Bounded by a timeout shorter than the interval, and by a size.
    _, kwargs = client.sent[0]
    assert kwargs["timeout_s"] < 0.01 and kwargs["max_bytes"] == scraping.MAX_PAGE_BYTES


def test_failures_cost_one_note_back_off_and_stop(caplog: pytest.LogCaptureFixture) -> None:
    client = FakeClient([ServerUnreachable(f"cannot reach {URL}: Connection refused")])
    scraper = Scraper(client, URL, interval_s=0.005, sink=None)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="loadgen"):
        run_for(scraper, 1.0)
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 1 and "Connection refused" in notes[0], notes
    # Stopped after MAX_FAILURES in a row, each wait twice the one before (5, 10, 20, 40 ms).
    assert len(client.sent) == MAX_FAILURES
    assert scraper.t_ns == [] and scraper.chunks == []


def test_a_page_that_recovers_is_kept(caplog: pytest.LogCaptureFixture) -> None:
    pages: list[Any] = ["<html>502 Bad Gateway</html>", "llamacpp:requests_deferred 3\n"]
    scraper = Scraper(FakeClient(pages), URL, interval_s=0.005, sink=None)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="loadgen"):
        run_for(scraper, 0.2)
    assert len(caplog.records) == 1 and "not Prometheus text" in caplog.records[0].getMessage()
    assert scraper.samples and scraper.samples[-1] == {("requests_waiting", ()): 3.0}


def test_stopped_before_t0_nothing_was_scraped() -> None:
    scrapers = Scrapers([Scraper(FakeClient(["x 1\n"]), URL, 1.0, None)])  # type: ignore[arg-type]
    assert asyncio.run(scrapers.stop()) is None
