"""The client's verdict on itself: how much delay its own stamps carry, whether that matters for
what was measured, and if it does, why and what to do.

The rule (docs/performance.md, "The verdict", gives the rationale):

- **The client's delay** is the loop lag p99: the coordinator PINGs every worker every 10 ms
  with its perf_counter_ns, and the delay until the worker's loop handles it is the delay an
  SSE chunk arriving then waits before it is stamped. At a finite rate, the send lag p99 (release
  instant - scheduled instant) is the delay inside every latency counted from the intended send.
- **In a closed loop** (``--request-rate inf``: every request sent as soon as a slot frees, a
  burst of them at t0) the requests do not fall at random moments of the run: a burst's first
  tokens arrive while its sends and the previous streams' ends hold the loop, so a loop-lag p99
  over time understates what they meet. There the client's delay is the larger of that p99 and
  the loop lag that the first tokens meet at p99 if the longest stalls fell where the first
  tokens were densest (``aligned_delay_ms``); in bursts that is the longest stall.
- **It matters** when it is over ``DELAY_SHARE`` (10 %) of the smallest median it distorts:
  the loop lag against the median ITL and the median TTFT (E2EL for pooling), the send lag
  against the median TTFT. A 1 ms delay matters for a 5 ms ITL, not for a 2 s TTFT.
- **Why**, when it matters (more than one may hold):
  - *loadgen's workers saturated*: a worker's loop thread wanted a CPU (ran or waited to)
    ``WORKER_BUSY_PCT`` (90 %) of the run, or of its busiest 100 ms, and ran at least a
    quarter of that time itself (one that mostly waited was held up by the host). Over the
    whole run it is judged even when the delay is small: a saturated worker caps the throughput
    it reports. Add --workers, or lower the rate.
  - *host busy*: other processes and hypervisor steal took ``HOST_BUSY_PCT`` (25 %) of all CPUs'
    time or more. Free the CPUs or run loadgen elsewhere.
  - *too fast for this machine*: the median ITL (or, paced, the median gap between arrivals) is
    under ``RESOLUTION_MULTIPLE`` (3) times the typical wake-up delay measured in the run (loop
    lag p50; send lag p50 for arrivals), so those intervals are not resolved; or the delay
    matters and neither cause above explains it, so it is the machine's own floor for this
    client. Read TPOT (a per-request mean) rather than ITL.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field

import numpy as np

from loadgen.records.model import HostUsage
from loadgen.report.stats import sample_stats

DELAY_SHARE = 0.10
WORKER_BUSY_PCT = 90.0
WORKER_RAN_SHARE = 0.25  # of a busy worker's demand, the part it must have run itself
HOST_BUSY_PCT = 25.0
RESOLUTION_MULTIPLE = 3.0
PROBE_SLOT_S = 0.010  # the time one loop-lag sample stands for: the probes' interval
# workers/loop_probe.py's tick: a chunk that came between two ticks waited at most the next
# tick's lag plus this
PROBE_TICK_MS = 1.0

# How a verdict line starts: judged OK, judged client-bound, or a run that never ended.
VERDICT_HEADS = ("client: OK: ", "client-bound: ", "client: not judged: ")

SATURATED = "workers saturated"
HOST_BUSY = "host busy"
TOO_FAST = "too fast for this machine"


@dataclass
class RunScale:
    """The medians the client's delay is judged against (ms; None where the run has none)."""

    itl_ms: float | None = None
    ttft_ms: float | None = None
    ttft_name: str = "TTFT"  # "E2EL" for pooling, whose answer has one instant
    arrival_gap_ms: float | None = None  # paced runs: median gap between scheduled arrivals


@dataclass
class ClientHealth:
    """The figures the verdict is taken from."""

    send_lag_p99_ms: float
    send_lag_judged: bool  # False at --request-rate inf
    loop_lag_p99_ms: float
    loop_lag_max_ms: float
    loop_lag_samples: int
    worker_cpu_pct: list[float]
    loop_lag_p50_ms: float = 0.0
    send_lag_p50_ms: float = 0.0
    scale: RunScale = field(default_factory=RunScale)
    host: HostUsage | None = None
    burst_delay_p99_ms: float | None = None  # closed loop: aligned_delay_ms

    @property
    def client_delay_ms(self) -> float:
        """The delay the verdict states for the client's stamps: the loop-lag p99, or in a
        closed loop the larger aligned delay of its first tokens."""
        return max(self.loop_lag_p99_ms, self.burst_delay_p99_ms or 0.0)

    def to_json(self) -> dict:
        """The figures, the judgement and the thresholds for the result JSON."""
        judged = judge(self)
        return {
            "send_lag_p99_ms": self.send_lag_p99_ms,
            "send_lag_judged": self.send_lag_judged,
            "loop_lag_p99_ms": self.loop_lag_p99_ms,
            "loop_lag_max_ms": self.loop_lag_max_ms,
            "loop_lag_samples": self.loop_lag_samples,
            "worker_cpu_pct": self.worker_cpu_pct,
            "loop_lag_p50_ms": self.loop_lag_p50_ms,
            "send_lag_p50_ms": self.send_lag_p50_ms,
            "burst_delay_p99_ms": self.burst_delay_p99_ms,
            "judged_against_ms": {
                "median_itl": self.scale.itl_ms,
                f"median_{self.scale.ttft_name.lower()}": self.scale.ttft_ms,
                "median_arrival_gap": self.scale.arrival_gap_ms,
            },
            "delay_p99_ms": judged.delay_ms,
            "delay_share": judged.share if math.isfinite(judged.share) else None,
            "delay_of": judged.quantity,
            "causes": judged.causes,
            "host": asdict(self.host) if self.host is not None else None,
            "thresholds": {
                "delay_share": DELAY_SHARE,
                "worker_cpu_pct": WORKER_BUSY_PCT,
                "host_busy_pct": HOST_BUSY_PCT,
                "resolution_multiple": RESOLUTION_MULTIPLE,
            },
        }


def measure(
    send_lag_ms: np.ndarray,
    loop_lag_ns: np.ndarray,
    worker_cpu_ns: list[int],
    worker_wall_ns: list[int],
    request_rate: float,
    *,
    scale: RunScale | None = None,
    host: HostUsage | None = None,
    first_token_s: np.ndarray | None = None,
) -> ClientHealth:
    """Reduce the raw samples (send lags of released requests, loop-lag probe delays, worker
    CPU; ``first_token_s``: the successful requests' first-token instants, for a closed loop)."""
    send = sample_stats(send_lag_ms, [50, 99])
    loop = sample_stats(np.asarray(loop_lag_ns, dtype=np.float64) / 1e6, [50, 99])
    burst = None
    if math.isinf(request_rate) and first_token_s is not None:
        burst = aligned_delay_ms(np.asarray(loop_lag_ns), np.asarray(first_token_s))
    return ClientHealth(
        send_lag_p99_ms=send.at(99),
        send_lag_judged=not math.isinf(request_rate),
        loop_lag_p99_ms=loop.at(99),
        loop_lag_max_ms=loop.max,
        loop_lag_samples=loop.count,
        worker_cpu_pct=[
            100.0 * cpu / wall if wall > 0 else 0.0
            for cpu, wall in zip(worker_cpu_ns, worker_wall_ns, strict=True)
        ],
        loop_lag_p50_ms=loop.at(50),
        send_lag_p50_ms=send.at(50),
        scale=scale if scale is not None else RunScale(),
        host=host,
        burst_delay_p99_ms=burst,
    )


def aligned_delay_ms(
    loop_lag_ns: np.ndarray,
    first_token_s: np.ndarray,
    share: float = 0.01,
    slot_s: float = PROBE_SLOT_S,
) -> float | None:
    """The loop lag the first tokens meet at p99 (``share`` of them above it) if the loop's
    longest stalls fell in the slots (``slot_s``, a probe's interval) where the first tokens
    were densest: the requests of the k densest slots, together within ``share``, may meet
    the k longest lags, and no more (ms; None without samples or first tokens).

    It bounds what a closed loop's requests meet, since there the loop is held by them: a
    burst puts most of them in one slot, and the bound is the longest lag measured."""
    if not len(loop_lag_ns) or not len(first_token_s):
        return None
    slots = ((first_token_s - first_token_s.min()) / slot_s).astype(np.int64)
    densest = np.sort(np.bincount(slots))[::-1]
    excused = int(np.searchsorted(np.cumsum(densest), share * len(first_token_s), side="right"))
    longest = np.sort(np.asarray(loop_lag_ns, dtype=np.float64))[::-1]
    return float(longest[min(excused, len(longest) - 1)]) / 1e6 + PROBE_TICK_MS


@dataclass
class Judgement:
    """What the verdict found: the delay that weighs most against what it distorts, and why."""

    delay_ms: float | None  # None when nothing was sampled
    delay_kind: str  # "client delay" (loop lag) or "send lag"
    quantity: str  # "median ITL", "median TTFT", ...
    quantity_ms: float
    share: float  # delay / quantity (inf against a zero quantity)
    matters: bool
    causes: list[str]
    unresolved: list[str]  # "ITL", "arrivals": intervals under the resolution multiple


def judge(health: ClientHealth) -> Judgement:
    """The rule of this module's docstring, applied to ``health``."""
    scale = health.scale
    pairs: list[tuple[str, float, str, float]] = []
    if health.loop_lag_samples:
        delay = health.client_delay_ms
        if scale.itl_ms is not None:
            pairs.append(("client delay", delay, "median ITL", scale.itl_ms))
        if scale.ttft_ms is not None:
            pairs.append(("client delay", delay, f"median {scale.ttft_name}", scale.ttft_ms))
    if health.send_lag_judged and scale.ttft_ms is not None:
        pairs.append(
            ("send lag", health.send_lag_p99_ms, f"median {scale.ttft_name}", scale.ttft_ms)
        )
    worst = max(pairs, key=lambda p: _share(p[1], p[3]), default=None)
    share = _share(worst[1], worst[3]) if worst is not None else 0.0
    matters = share > DELAY_SHARE
    unresolved = []
    if (
        health.loop_lag_samples
        and scale.itl_ms is not None
        and scale.itl_ms < RESOLUTION_MULTIPLE * health.loop_lag_p50_ms
    ):
        unresolved.append("ITL")
    if (
        health.send_lag_judged
        and scale.arrival_gap_ms is not None
        and scale.arrival_gap_ms < RESOLUTION_MULTIPLE * health.send_lag_p50_ms
    ):
        unresolved.append("arrivals")
    causes = []
    if _saturated(health, over_run=True) or (matters and _saturated(health, over_run=False)):
        causes.append(SATURATED)
    if matters and health.host is not None and _taken_by_others(health.host) >= HOST_BUSY_PCT:
        causes.append(HOST_BUSY)
    if unresolved or (matters and not causes):
        causes.append(TOO_FAST)
    return Judgement(
        delay_ms=worst[1] if worst is not None else None,
        delay_kind=worst[0] if worst is not None else "client delay",
        quantity=worst[2] if worst is not None else "",
        quantity_ms=worst[3] if worst is not None else 0.0,
        share=share,
        matters=matters,
        causes=causes,
        unresolved=unresolved,
    )


def _share(delay_ms: float, quantity_ms: float) -> float:
    if quantity_ms > 0:
        return delay_ms / quantity_ms
    return math.inf if delay_ms > 0 else 0.0


def _demand(health: ClientHealth, *, peak: bool = False) -> tuple[list[float], list[float]]:
    """Each worker's loop thread: time on a CPU and demand (on a CPU + waiting for one), over
    the run or in its busiest window, in %; its process's CPU for both where the host was not
    measured."""
    cpu = health.worker_cpu_pct
    host = health.host
    if host is None or len(host.worker_demand_pct) != len(cpu):
        return cpu, cpu
    if peak and len(host.worker_peak_demand_pct) == len(cpu):
        return host.worker_peak_cpu_pct, host.worker_peak_demand_pct
    ran = [d - w for d, w in zip(host.worker_demand_pct, host.worker_wait_pct, strict=True)]
    return ran, host.worker_demand_pct


def _saturated(health: ClientHealth, *, over_run: bool) -> bool:
    """A worker wanted a CPU WORKER_BUSY_PCT of the run (or of its busiest window) and ran at
    least WORKER_RAN_SHARE of that itself: the work was its own, not a queue for the CPU."""
    cpu, demand = _demand(health, peak=not over_run)
    return any(
        d >= WORKER_BUSY_PCT and c >= WORKER_RAN_SHARE * d for c, d in zip(cpu, demand, strict=True)
    )


def _taken_by_others(host: HostUsage) -> float:
    """% of all CPUs' time that went to other processes (the --mock server included) and to
    the hypervisor."""
    return host.other_pct + host.started_pct + host.steal_pct


def verdict(health: ClientHealth) -> str:
    """One line: ``client: OK: ...`` or ``client-bound: ...``, the delay against what it
    distorts, the CPU figures, then each cause with its remedy."""
    judged = judge(health)
    parts = [_delay_text(health, judged), *_burst_text(health, judged), _resources_text(health)]
    parts += [_cause_text(cause, health, judged) for cause in judged.causes]
    head = VERDICT_HEADS[1] if judged.causes else VERDICT_HEADS[0]
    return head + "; ".join(parts)


def _delay_text(health: ClientHealth, judged: Judgement) -> str:
    if judged.delay_ms is None:
        return "client delay not sampled: the run ended before its first 10 ms probe"
    if judged.delay_kind == "send lag":
        said = f"requests left ≤ {judged.delay_ms:.2f} ms late at p99"
    else:
        said = f"timings carry ≤ {judged.delay_ms:.2f} ms of client delay at p99"
    quantity = f"{judged.quantity} {judged.quantity_ms:.2f} ms"
    if not math.isfinite(judged.share):
        return f"{said}, against a {quantity}"
    if judged.share >= 10:
        return f"{said}, {judged.share:.0f}× the {quantity}"
    percent = f"{100 * judged.share:.1f}" if judged.share < 0.01 else f"{100 * judged.share:.0f}"
    return f"{said}, {percent} % of the {quantity}"


def _burst_text(health: ClientHealth, judged: Judgement) -> list[str]:
    """Why a closed loop's stated delay is over its loop-lag p99, where it is."""
    burst = health.burst_delay_p99_ms
    if judged.delay_kind != "client delay" or burst is None or burst <= health.loop_lag_p99_ms:
        return []
    return [
        "a closed loop sends in bursts, whose first tokens meet the loop's longest stalls: "
        f"its loop lag p99 over the run's time was {health.loop_lag_p99_ms:.2f} ms"
    ]


def _resources_text(health: ClientHealth) -> str:
    said = f"worker CPU max {max(health.worker_cpu_pct, default=0.0):.0f} %"
    host = health.host
    if host is None:
        return f"{said}, host CPU not measured"
    waited = max(host.worker_wait_pct, default=0.0)
    if waited >= 10:
        said += f", a worker {waited:.0f} % of the run waiting for a CPU"
    said += f", other processes {host.other_pct + host.started_pct:.0f} % of the CPUs"
    if host.steal_pct >= 1:
        said += f", hypervisor steal {host.steal_pct:.0f} %"
    return said


def _cause_text(cause: str, health: ClientHealth, judged: Judgement) -> str:
    if cause == SATURATED:
        return f"{SATURATED}: {_more_workers(health)}"
    if cause == HOST_BUSY:
        return _host_busy_text(health.host)
    return _too_fast_text(health, judged)


def _more_workers(health: ClientHealth) -> str:
    workers = len(health.worker_cpu_pct)
    cpus = health.host.cpus if health.host is not None else None
    rate = "lower the rate" if health.send_lag_judged else "lower --max-concurrency"
    if cpus is None:
        return f"add --workers if CPUs are free, or {rate}"
    if workers < cpus:
        noun = "worker" if workers == 1 else "workers"
        return f"add --workers, {workers} {noun} on {cpus} CPUs, or {rate}"
    return f"{rate}: every one of the {cpus} CPUs has a worker"


def _host_busy_text(host: HostUsage | None) -> str:
    assert host is not None
    if host.steal_pct > host.other_pct + host.started_pct:
        return f"{HOST_BUSY}, mostly hypervisor steal: use a host with dedicated CPUs"
    if host.busiest_started:
        return f"{HOST_BUSY}, most by the --mock server: run the server on another machine"
    if host.busiest_name:
        who = f"{host.busiest_name} pid {host.busiest_pid} {host.busiest_pct:.0f} %"
        if host.busiest_serves:
            return (
                f"{HOST_BUSY}, most by the server under test ({who}), which shares these CPUs: "
                "its share is not the client's; run the server on another machine or give each "
                "its own CPUs (taskset -c)"
            )
        return f"{HOST_BUSY}, most by {who}: stop it or run loadgen on another machine"
    return f"{HOST_BUSY}: free the CPUs or run loadgen on another machine"


def _too_fast_text(health: ClientHealth, judged: Judgement) -> str:
    texts = []
    if "ITL" in judged.unresolved:
        under = RESOLUTION_MULTIPLE * health.loop_lag_p50_ms
        texts.append(
            f"ITLs under {under:.2f} ms, {RESOLUTION_MULTIPLE:g}× its wake-up delay, are not "
            "resolved: read TPOT, a per-request mean"
        )
    if "arrivals" in judged.unresolved:
        under = RESOLUTION_MULTIPLE * health.send_lag_p50_ms
        texts.append(
            f"arrivals under {under:.2f} ms apart, {RESOLUTION_MULTIPLE:g}× its timer delay, "
            "leave in bunches: lower the rate to keep the pattern asked for"
        )
    if not texts and judged.delay_ms is not None:
        finest = judged.delay_ms / DELAY_SHARE
        remedy = (
            "read TPOT, a per-request mean"
            if judged.quantity == "median ITL"
            else "time a server this fast from a machine with faster wake-ups"
        )
        texts.append(
            "neither loadgen's workers nor other processes explain the delay, so times under "
            f"{finest:.1f} ms are finer than it resolves to {100 * DELAY_SHARE:.0f} %: {remedy}"
        )
    return f"{TOO_FAST}: {', and '.join(texts)}"


def not_judged(health: ClientHealth) -> str:
    """The verdict line of a run that never ended: its workers' loop lag and CPU were never
    reported, so only the send lag is known."""
    send = f"{health.send_lag_p99_ms:.2f} ms" + (
        "" if health.send_lag_judged else " at --request-rate inf"
    )
    return (
        f"{VERDICT_HEADS[2]}the run did not end, so its workers' loop lag and CPU were never "
        f"reported; send lag p99 {send}"
    )


# The server's side, from its /metrics during the run (report/server_figures.py): said only
# where it matters for what the client measured.
SERVER_QUEUED_PCT = 10.0  # of the run's scrapes finding requests waiting
SERVER_KV_FULL_PCT = 90.0


def server_note(
    queued_pct: float | None,
    waiting_peak: float | None,
    kv_peak_pct: float | None,
    preemptions: float | None,
) -> str | None:
    """One sentence on the server's queue and KV cache during the run, where they explain
    latency the client measured (TTFT counts a queued request's wait, a preempted one's
    recompute); None where nothing notable was seen or scraped."""
    parts = []
    if queued_pct is not None and queued_pct >= SERVER_QUEUED_PCT:
        peak = f" (up to {waiting_peak:.0f} waiting)" if waiting_peak is not None else ""
        parts.append(
            f"it queued requests for {queued_pct:.0f} % of the run{peak}, and TTFT counts that wait"
        )
    preempted = f"it preempted {preemptions or 0:.0f} requests, which redo their prefill"
    if kv_peak_pct is not None and kv_peak_pct >= SERVER_KV_FULL_PCT:
        full = f"its KV cache peaked at {kv_peak_pct:.0f} %"
        parts.append(f"{full} and {preempted}" if preemptions else full)
    elif preemptions:
        parts.append(preempted)
    return "server: " + "; ".join(parts) if parts else None
