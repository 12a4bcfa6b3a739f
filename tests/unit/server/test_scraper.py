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
        self.sent_ns: list[int] = []

    async def send(self, method: str, url: str, **kwargs: Any) -> Answer:
        self.sent.append((url, kwargs))
        self.sent_ns.append(time.perf_counter_ns())
        page = self.pages.pop(0) if len(self.pages) > 1 else self.pages[0]
        if isinstance(page, Exception):
            raise page
        now = time.perf_counter_ns()
        return Answer(200, {}, [(now, page.encode())], now - 1000, now + 1000)


def run_for(scraper: Scraper, seconds: float, at_least: int = 0) -> int:
    """Run the scraper from t0 = now for ``seconds`` (and on until it holds ``at_least``
    scrapes, 10 s at most: a busy machine's thread pool can be slow to parse); t0."""

    async def main() -> int:
        stop = asyncio.Event()
        t0 = time.perf_counter_ns()
        task = asyncio.create_task(scraper.run(t0, stop))
        await asyncio.sleep(seconds)
        waited = 0.0
        while scraper.scrapes < at_least and waited < 10.0:
            await asyncio.sleep(0.05)
            waited += 0.05
        stop.set()
        await task
        return t0

    return asyncio.run(main())


def test_samples_on_the_runs_clock_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(scraping, "CHUNK_SCRAPES", 3)
    chunks: list[dict] = []
    client = FakeClient(["vllm:num_requests_running 2\n"])
    scraper = Scraper(client, URL, interval_s=0.01, sink=chunks.append)  # type: ignore[arg-type]
    run_for(scraper, 0.2, at_least=4)
    times = [t for chunk in chunks for t in chunk["t_ns"]]
    assert scraper.scrapes >= 4
    assert all(0 <= t < 11e9 for t in times)
    assert times == sorted(times)
    assert len(times) == scraper.scrapes  # all flushed at the end
    assert all(len(c["t_ns"]) <= 3 for c in chunks)
    # What went to the sink (the records file) is let go: a long run holds none of it.
    assert scraper.t_ns == [] and scraper.samples == [] and scraper.chunks == []
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


class CountingClient(FakeClient):
    """Answers ``generation_tokens`` pages with a counter that grows by 10 each GET; GETs from
    the ``hang_from``-th on never answer."""

    def __init__(self, hang_from: int | None = None) -> None:
        super().__init__([])
        self.hang_from = hang_from

    async def send(self, method: str, url: str, **kwargs: Any) -> Answer:
        if self.hang_from is not None and len(self.sent) >= self.hang_from:
            self.sent.append((url, kwargs))
            await asyncio.sleep(3600)
        self.pages = [f"vllm:generation_tokens_total {10 * len(self.sent)}\n"]
        return await super().send(method, url, **kwargs)


def run_then_stop(scrapers: Scrapers, t0_ahead_s: float, seconds: float) -> tuple[int, int, Any]:
    """Start the scrapers with t0 ``t0_ahead_s`` from now, stop them ``seconds`` after t0;
    t0, the instant the stop was asked (both on the run's clock's source) and the series."""

    async def main() -> tuple[int, int, Any]:
        t0 = time.perf_counter_ns() + int(t0_ahead_s * 1e9)
        scrapers.start(t0)
        await asyncio.sleep(t0_ahead_s + seconds)
        stopped = time.perf_counter_ns()
        return t0, stopped, await scrapers.stop()

    return asyncio.run(main())


def test_first_scrape_before_t0_and_a_final_one_after_the_stop() -> None:
    client = CountingClient()
    scraper = Scraper(client, URL, interval_s=10.0, sink=None)  # type: ignore[arg-type]
    t0, stopped, series = run_then_stop(Scrapers([scraper]), t0_ahead_s=0.05, seconds=0.1)
    # Two scrapes in a run shorter than the interval: at once (before t0) and at the stop.
    assert len(client.sent) == 2
    first, last = scraper.t_ns
    assert first == 0 and last >= stopped - t0  # read before t0, it holds at t0
    (generated,) = series
    assert generated.name == "generation_tokens" and list(generated.values) == [0.0, 10.0]
    _, kwargs = client.sent[1]
    assert kwargs["timeout_s"] > scraping.FINAL_TIMEOUT_S  # the wait's bound says why


def test_the_scrape_after_the_first_is_an_interval_after_t0() -> None:
    client = CountingClient()
    scraper = Scraper(client, URL, interval_s=0.1, sink=None)  # type: ignore[arg-type]
    t0, _, _ = run_then_stop(Scrapers([scraper]), t0_ahead_s=0.05, seconds=0.15)
    # The first sent before t0 (stamped 0), the next an interval after t0, not after the first.
    assert client.sent_ns[0] < t0 and client.sent_ns[1] >= t0 + 100_000_000
    assert scraper.t_ns[0] == 0 and scraper.t_ns[1] >= 100_000_000


def test_final_scrapes_that_hang_add_at_most_the_bound(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(scraping, "FINAL_TIMEOUT_S", 0.5)
    clients: list[Any] = [CountingClient(hang_from=1) for _ in range(2)]
    hung = [Scraper(client, f"{URL}{i}", 10.0, None) for i, client in enumerate(clients)]
    fine = Scraper(CountingClient(), URL, 10.0, None)  # type: ignore[arg-type]
    with caplog.at_level(logging.INFO, logger="loadgen"):
        _, stopped, series = run_then_stop(Scrapers([*hung, fine]), 0.0, 0.05)
        ended = time.perf_counter_ns()
    # The finals run at once: two that hang cost one bound (two would be 1 s), never an hour.
    assert 0.5 <= (ended - stopped) / 1e9 < 0.95
    notes = [r.getMessage() for r in caplog.records]
    assert len(notes) == 2 and all("no page within 0.5 s at the run's end" in n for n in notes)
    assert [len(s.t_ns) for s in hung] == [1, 1] and len(fine.t_ns) == 2  # each keeps its own
    assert {s.source for s in series} == {URL, URL + "0", URL + "1"}


def test_no_final_scrape_after_the_scraper_gave_up() -> None:
    client = FakeClient([ServerUnreachable(f"cannot reach {URL}: Connection refused")])
    scraper = Scraper(client, URL, interval_s=0.002, sink=None)  # type: ignore[arg-type]
    assert run_then_stop(Scrapers([scraper]), 0.0, 0.5)[2] is None
    assert scraper.gave_up and len(client.sent) == MAX_FAILURES
