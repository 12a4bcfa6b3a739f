"""A run's steady window and its figures, and the run's requests as a time-bounded run counts
them.

Two windows, one rule of membership: a request is in the window when it was sent at or after
the window's start and ended at or before its end.
- ``--warmup-s W --cooldown-s C`` (``timed_window``): from W s after t0 to C s before the
  run's end (its last request's end).
- ``--steady-state`` of a campaign (``steady_window``): from the first request's end to the
  last request's send, so ramp-up and ramp-down are trimmed.

``window_metrics`` counts a run's campaign figures (the metric table's rows whose views name
``campaign``) over a window's requests: the figures every view reports of it. Pure functions of
arrays: no sockets, no files.

``sent_by_deadline`` drops the requests ``--duration``'s deadline left unsent: prepared as an
upper bound, they are no part of the run (neither sent nor failed), in every view.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from loadgen.records.event_source import PickedEvents
from loadgen.records.model import RunRecords
from loadgen.report.chunked_stats import Chunks, chunked_stats
from loadgen.report.failures import CANCELLED, FAILED
from loadgen.report.metric_table import CAMPAIGN, figures_in, latencies_in
from loadgen.report.metrics import RequestResults, Timings, good_requests
from workers.protocol import NOT_SENT_AT_DEADLINE


@dataclass(frozen=True)
class SteadyWindow:
    """Which requests a run's steady window keeps, where it starts and ends (s after t0), and
    its length."""

    kept: np.ndarray  # bool [N]
    duration_s: float
    trimmed: int
    start_s: float = 0.0
    end_s: float = 0.0


def steady_window(send_s: np.ndarray, end_s: np.ndarray, sent: np.ndarray) -> SteadyWindow:
    """The requests sent after the first request ended and ended before the last one was sent
    (ramp-up and ramp-down trimmed); requests never sent are trimmed too."""
    if not sent.any():
        return SteadyWindow(np.zeros(len(sent), bool), 0.0, len(sent))
    return _window(send_s, end_s, sent, float(end_s[sent].min()), float(send_s[sent].max()))


def timed_window(
    send_s: np.ndarray, end_s: np.ndarray, sent: np.ndarray, warmup_s: float, cooldown_s: float
) -> SteadyWindow:
    """The requests sent ``warmup_s`` or more after t0 that ended ``cooldown_s`` or more
    before the run's end (its last request's end); requests never sent are trimmed too."""
    run_end_s = float(end_s[sent].max()) if sent.any() else 0.0
    return _window(send_s, end_s, sent, warmup_s, run_end_s - cooldown_s)


def _window(
    send_s: np.ndarray, end_s: np.ndarray, sent: np.ndarray, start_s: float, stop_s: float
) -> SteadyWindow:
    kept = sent & (send_s >= start_s) & (end_s <= stop_s)
    return SteadyWindow(
        kept, max(stop_s - start_s, 0.0), int(len(sent) - kept.sum()), start_s, stop_s
    )


def campaign_statistics(percentiles: Sequence[float] = ()) -> tuple[str, ...]:
    """The statistics a campaign keeps of each latency: mean, median, p99 and the run's other
    --metric-percentiles, in increasing order."""
    chosen = sorted({*percentiles, 99.0})
    # upstream's naming of a percentile (summary.percentile_word, which imports this module)
    return ("mean", "median", *(f"p{int(p) if int(p) == p else p}" for p in chosen))


@dataclass(frozen=True)
class CountedRequests:
    """The requests a window counts of one run and the samples of each latency of the metric
    table, in seconds: one value per request each, but ITL's, whose values (one per token
    event) are read in chunks (``itl``) or laid out by ``sample``."""

    kept: np.ndarray  # bool [N]: in the window
    ok: np.ndarray  # bool [N]: kept, succeeded, streamed a token event
    output_lens: np.ndarray  # of the ok requests
    tpot_s: np.ndarray  # of the ok requests (0 for an answer of one token), as goodput counts it
    samples: dict[str, np.ndarray]  # latency key -> seconds (ITL left out)
    itl: Chunks  # the ok requests' ITLs (s), request-major, a chunk at a time

    def sample(self, key: str) -> np.ndarray:
        """One latency's values (s), laid out whole: ITL's read from its chunks (for the views
        that need every value at once: a campaign's bootstrap)."""
        if key != "itl":
            return self.samples[key]
        parts = list(self.itl())
        return np.concatenate(parts) if parts else np.zeros(0)


def counted(results: RequestResults, timings: Timings, kept: np.ndarray) -> CountedRequests:
    """The ``kept`` requests that count (succeeded with a token event) and their latencies."""
    ok = kept & results.success & (np.diff(results.event_offsets) > 0)
    out = results.output_lens[ok]
    many = out > 1
    ttft, e2el = timings.ttft_s[ok], timings.latency_s[ok]
    tpot = np.zeros(len(out))
    tpot[many] = (e2el - ttft)[many] / (out[many] - 1)
    queue = timings.queue_s[ok]
    samples = {  # every latency of the metric table, so any of them may name the campaign
        "ttft": ttft,
        "e2el": e2el,
        "tpot": tpot[many],
        "client_queue_time": queue,
        "e2el_including_client_queue": e2el + queue,
    }
    return CountedRequests(kept, ok, out, tpot, samples, timings.itl_chunks(ok))


def window_metrics(
    results: RequestResults,
    timings: Timings,
    kept: np.ndarray,
    seconds: float,
    *,
    pooling: bool,
    percentiles: Sequence[float],
    goodput: Mapping[str, float] | None,
    outcome: np.ndarray | None = None,
    not_sent: float = math.nan,
) -> dict[str, float]:
    """The campaign figures and latencies counted over the ``kept`` requests, throughputs over
    ``seconds`` (a figure it cannot count is NaN). ``outcome``: each request's (failures.py),
    to count the failed and the cancelled apart; ``not_sent``: the run's requests never sent,
    in no window."""
    requests = counted(results, timings, kept)
    ok, out, samples = requests.ok, requests.output_lens, requests.samples
    ttft, tpot, e2el = samples["ttft"], requests.tpot_s, samples["e2el"]
    metrics: dict[str, float] = {}
    for latency in latencies_in(CAMPAIGN):
        statistics = campaign_statistics(percentiles)
        if latency.key == "itl":  # one value per token event: read in chunks
            metrics |= _chunked_statistics(requests.itl, statistics)
            continue
        values_ms = samples[latency.key] * 1000.0
        for stat in statistics:
            metrics[f"{stat}_{latency.key}_ms"] = _statistic(stat, values_ms)
    figures = {
        "completed": float(ok.sum()),
        "failed": float(
            (kept & ~ok).sum() if outcome is None else (kept & (outcome == FAILED)).sum()
        ),
        "cancelled": math.nan if outcome is None else float((kept & (outcome == CANCELLED)).sum()),
        "not_sent": not_sent,
        "request_throughput": int(ok.sum()) / seconds if seconds > 0 else math.nan,
        "output_throughput": float(out.sum()) / seconds if seconds > 0 else math.nan,
        "request_goodput": (
            good_requests(ttft, tpot, e2el, dict(goodput)) / seconds
            if goodput and seconds > 0
            else math.nan
        ),
    }
    for figure in figures_in(CAMPAIGN, pooling):
        metrics[figure.key] = figures.get(figure.key, math.nan)
    return metrics


def _chunked_statistics(itl: Chunks, statistics: Sequence[str]) -> dict[str, float]:
    """``_statistic`` of each of ``statistics`` over the ITLs in ms, from chunks (the same
    values to the last bit: loadgen/report/chunked_stats.py)."""

    def in_ms() -> Iterator[np.ndarray]:
        for chunk in itl():
            yield chunk * 1000.0

    named = [stat for stat in statistics if stat not in ("mean", "median")]
    s = chunked_stats(in_ms, [float(stat[1:]) for stat in named], empty=math.nan)
    by_stat = {"mean": s.mean, "median": s.median}
    by_stat |= {stat: value for stat, (_, value) in zip(named, s.percentiles, strict=True)}
    return {f"{stat}_itl_ms": by_stat[stat] for stat in statistics}


def _statistic(stat: str, values: np.ndarray) -> float:
    if len(values) == 0:
        return math.nan
    if stat == "mean":
        return float(values.mean())
    if stat == "median":
        return float(np.median(values))
    return float(np.percentile(values, float(stat[1:])))


def sent_by_deadline(run: RunRecords) -> RunRecords:
    """The run without the requests --duration's deadline left unsent (the same run when
    there are none), renumbered in order."""
    unsent = [i for i, error in run.errors.items() if error == NOT_SENT_AT_DEADLINE]
    if not unsent:
        return run
    keep = np.ones(run.num_requests, bool)
    keep[unsent] = False
    new_index = np.cumsum(keep) - 1
    counts = np.diff(run.event_offsets)
    records = run.records[keep].copy()
    records["index"] = np.arange(len(records))
    kept_counts = counts[keep]

    def renumbered(by_index: dict[int, str]) -> dict[int, str]:
        return {int(new_index[i]): v for i, v in by_index.items() if keep[i]}

    def cut(values: np.ndarray | None) -> np.ndarray | None:
        return None if values is None else values[keep]

    return dataclasses.replace(
        run,
        start=dataclasses.replace(run.start, num_requests=int(keep.sum())),
        records=records,
        worker=run.worker[keep],
        scheduled_ns=run.scheduled_ns[keep],
        input_tokens=run.input_tokens[keep],
        input_sequences=run.input_sequences[keep],
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.concatenate(([0], np.cumsum(kept_counts))).astype(np.int64),
        events=PickedEvents(run.event_source, keep),
        errors=renumbered(run.errors),
        texts=renumbered(run.texts),
        conversation=cut(run.conversation),
        turn=cut(run.turn),
        input_audio_s=cut(run.input_audio_s),
        end=(
            None
            if run.end is None
            else dataclasses.replace(run.end, output_lens=run.end.output_lens[keep])
        ),
    )
