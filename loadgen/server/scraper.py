"""Scraping the server's ``/metrics`` (and ``--telemetry-url`` exporters) during the timed run.

One ``Scraper`` per URL, each a task on the coordinator's loop from t0 to the run's end: its
first scrape at once, when t0 is set (just before it: the fleet sets t0 a little ahead), then
every ``interval_s`` from t0 it GETs the page (bounded in time by ``timeout_s``, shorter than
the interval, and in size by ``MAX_PAGE_BYTES``), parses it in a thread
(``metric_names.parse_page``) and keeps the samples, stamped with the middle of the request on
the run's clock (ns after t0; the first, read before t0, at 0). When the run's last request has
ended, ``Scrapers.stop`` takes one last scrape of each URL (all at once, bounded by
``FINAL_TIMEOUT_S``), so that a counter's growth from the first sample to the last covers the
whole run. Every ``CHUNK_SCRAPES`` scrapes, and at the end, the samples go to the records file
as a chunk (loadgen/records/server_series.py) and are let go: the run's report reads them back
from the file, so an hour of scrapes (one page a second) costs the coordinator no memory.

Never in the way: a page that is slow, missing, too big or not Prometheus text costs one note
per URL, then the interval doubles (up to ``MAX_BACKOFF`` times); after ``MAX_FAILURES``
failures in a row the scraper stops. Nothing it does fails the run.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

from loadgen.records.server_series import MetricSeries, chunk_json, series_of
from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError
from loadgen.server.metric_names import MAX_SERIES, Page, PageError, parse_page

log = logging.getLogger(__name__)

MAX_PAGE_BYTES = 8 << 20  # a vLLM page is ~100 KB; a page over this is not scraped
TIMEOUT_SHARE = 0.8  # of the interval: a scrape never overlaps the next
CHUNK_SCRAPES = 10
MAX_BACKOFF = 16  # times the interval, at most, after failures
MAX_FAILURES = 5  # in a row: the scraper stops
FINAL_TIMEOUT_S = 1.0  # the last scrape, after the run: the most it may delay the run's end

ChunkSink = Callable[[dict[str, Any]], None]


class Scraper:
    """Scrapes one URL every ``interval_s`` until stopped; what it kept is ``series()``."""

    def __init__(
        self, client: ServerClient, url: str, interval_s: float, sink: ChunkSink | None
    ) -> None:
        self.client = client
        self.url = url
        self.interval_s = interval_s
        self.timeout_s = interval_s * TIMEOUT_SHARE
        self.sink = sink
        # The scrapes not yet in a chunk; with no sink, every scrape (and every chunk): a run's
        # series are read back from its records file, so a long run keeps none of them.
        self.t_ns: list[int] = []
        self.samples: list[dict[tuple[str, Any], float]] = []
        self.chunks: list[dict[str, Any]] = []
        self.scrapes = 0
        self.flushed = 0  # scrapes already in a chunk
        self.noted = False
        self.capped = False
        self.gave_up = False  # after MAX_FAILURES in a row: no final scrape either

    async def run(self, t0_ns: int, stop: asyncio.Event) -> None:
        """Scrape at once (t0 is at most a moment ahead), then every interval from t0 until
        ``stop`` is set (or too many failures in a row)."""
        failures = 0
        while not stop.is_set():
            problem = await self.scrape_once(t0_ns)
            failures = failures + 1 if problem else 0
            if problem:
                self._note(problem)
                if failures >= MAX_FAILURES:
                    self.gave_up = True
                    break  # the note said so
            ahead_s = max(t0_ns - time.perf_counter_ns(), 0) / 1e9  # the next one is from t0
            wait_s = ahead_s + self.interval_s * min(2**failures, MAX_BACKOFF)
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(stop.wait(), wait_s)
        self.flush()

    async def final_scrape(self, t0_ns: int) -> None:
        """The last scrape, after the run's last request ended (unless the scraper gave up),
        within FINAL_TIMEOUT_S: a page that does not come by then costs the note, not the run."""
        if self.gave_up:
            return
        try:  # the client's deadline comes later: this one bounds it, and says why
            problem = await asyncio.wait_for(
                self.scrape_once(t0_ns, 2 * FINAL_TIMEOUT_S), FINAL_TIMEOUT_S
            )
        except asyncio.TimeoutError:
            problem = f"{self.url}: no page within {FINAL_TIMEOUT_S:g} s at the run's end"
        if problem:
            self._note(problem, "its series end at the scrape before")
        self.flush()

    async def scrape_once(self, t0_ns: int, timeout_s: float | None = None) -> str | None:
        """One scrape (within ``timeout_s``, else the interval's share), its samples kept;
        why it failed, or None."""
        try:
            answer = await self.client.send(
                "GET", self.url, timeout_s=timeout_s or self.timeout_s, max_bytes=MAX_PAGE_BYTES
            )
        except ServerError as exc:
            return str(exc)
        # The first scrape, read before t0 while nothing of the run has been sent, holds at
        # t0: stamped 0, it is inside the run's span (a run shorter than the interval keeps
        # one sample on the report's server panels).
        mid_ns = max((answer.sent_ns + answer.ended_ns) // 2 - t0_ns, 0)
        text = answer.body.decode("utf-8", "replace")
        try:
            page = await asyncio.to_thread(parse_page, text)
        except PageError as exc:
            return f"{self.url}: {exc}"
        self._keep(mid_ns, page)
        return None

    def _keep(self, t_ns: int, page: Page) -> None:
        if page.dropped and not self.capped:
            self.capped = True
            log.info(
                f"Server metrics from {self.url}: kept {MAX_SERIES} series of "
                f"{MAX_SERIES + page.dropped} (histogram buckets are never kept)"
            )
        self.t_ns.append(t_ns)
        self.samples.append(page.samples)
        self.scrapes += 1
        if len(self.t_ns) - self.flushed >= CHUNK_SCRAPES:
            self.flush()

    def flush(self) -> None:
        """The scrapes not yet in a chunk, as one, to the records file."""
        if self.flushed == len(self.t_ns):
            return
        chunk = chunk_json(self.url, self.t_ns[self.flushed :], self.samples[self.flushed :])
        if self.sink is None:
            self.flushed = len(self.t_ns)
            self.chunks.append(chunk)
        else:  # the records file holds them from here (RequestOrderEvents.series reads them)
            self.sink(chunk)
            self.t_ns.clear()
            self.samples.clear()

    def _note(self, problem: str, then: str = "the run goes on, scraping less often") -> None:
        if not self.noted:
            self.noted = True
            log.warning(f"warning: server metrics: {problem}; {then}")


class Scrapers:
    """The run's scrapers: started at t0, stopped after the run."""

    def __init__(self, scrapers: list[Scraper]) -> None:
        self.scrapers = scrapers
        self.stop_event = asyncio.Event()
        self.tasks: list[asyncio.Task[None]] = []
        self.t0_ns: int | None = None

    def start(self, t0_ns: int) -> None:
        """The run starts at ``t0_ns`` (a moment from now): so does every scraper, its first
        scrape at once."""
        self.t0_ns = t0_ns
        self.tasks = [
            asyncio.create_task(scraper.run(t0_ns, self.stop_event)) for scraper in self.scrapers
        ]

    async def stop(self) -> list[MetricSeries] | None:
        """Stop every scraper (a scrape in flight is cut short), then take each one's final
        scrape, all at once; the series kept by those with no sink, or None when they kept
        none (those with one wrote theirs to the records file)."""
        self.stop_event.set()
        for task in self.tasks:
            task.cancel()
        for task in self.tasks:  # none when the run stopped before t0
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self.t0_ns is not None:
            t0_ns = self.t0_ns
            await asyncio.gather(*(scraper.final_scrape(t0_ns) for scraper in self.scrapers))
        for scraper in self.scrapers:
            scraper.flush()
        chunks = [chunk for scraper in self.scrapers for chunk in scraper.chunks]
        return series_of(chunks) if chunks else None


def scrapers(
    client: ServerClient,
    server_metrics: bool,
    telemetry_urls: tuple[str, ...],
    interval_s: float,
    sink: ChunkSink | None,
) -> Scrapers | None:
    """The run's scrapers, or None when there is none: the server's ``/metrics`` (with its
    headers, on the coordinator's client) when ``server_metrics``, and each telemetry URL on
    a client of its own that sends no header (the server's API key stays with the server)."""
    chosen = []
    if server_metrics:
        chosen.append(Scraper(client, f"{client.server_url}/metrics", interval_s, sink))
    if telemetry_urls:
        bare = ServerClient(client.server_url, {}, client.insecure, client.connect_timeout_s)
        client.adopt(bare)
        chosen += [Scraper(bare, url, interval_s, sink) for url in telemetry_urls]
    return Scrapers(chosen) if chosen else None
