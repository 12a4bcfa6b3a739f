"""Interval coverage: how often a campaign point's 95 % latency interval holds the true value.

Simulated points with a known truth: each run's requests are lognormal latencies (median
50 ms, sigma 0.5) around a run effect drawn per run (``tau``: 0 when runs differ only by
their requests, 0.1 and 0.3 when a run's warm-up, placement or neighbours move it as a whole).
The truth of a statistic (mean, median, p99) is its expectation over runs, from 4,000
simulated runs; each trial draws ``k`` runs, takes the point's estimate as the mean of its
runs' values (as a campaign does) and its interval from the runs' request-level bootstrap
replicates (``loadgen.report.intervals``). Printed, per tau, k and statistic, beside the
nominal 95 %: the coverage and mean width (as a share of the truth) of the plain two-level
percentile interval and of loadgen's (``point_interval``: the same, stretched by
``small_runs_factor`` and clipped at 0).

    python scripts/bench/interval_coverage.py            # 300 trials a cell, about 1 minute
    python scripts/bench/interval_coverage.py --trials 1000
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from loadgen.report.intervals import (
    Clusters,
    percentile_interval,
    point_interval,
    request_replicates,
    two_level_replicates,
)

STATISTICS = ("mean", "median", "p99")
MEDIAN_MS = 50.0
SIGMA = 0.5


def statistic(values: np.ndarray, name: str) -> float:
    """A run's value of one statistic, as the report computes it."""
    if name == "mean":
        return float(values.mean())
    return float(np.percentile(values, 50 if name == "median" else 99))


def run_latencies(rng: np.random.Generator, requests: int, tau: float) -> np.ndarray:
    """One run's request latencies (ms): lognormal around this run's own effect."""
    return rng.lognormal(math.log(MEDIAN_MS) + rng.normal(0.0, tau), SIGMA, requests)


def truths(rng: np.random.Generator, requests: int, tau: float) -> dict[str, float]:
    """Each statistic's expectation over runs (4,000 simulated runs)."""
    runs = [run_latencies(rng, requests, tau) for _ in range(4000)]
    return {name: float(np.mean([statistic(r, name) for r in runs])) for name in STATISTICS}


def trial(
    rng: np.random.Generator, runs: int, requests: int, tau: float, seed: int
) -> dict[str, tuple[float, float, float, float, float]]:
    """One simulated point: per statistic, its estimate, the plain percentile interval and
    loadgen's."""
    drawn = [run_latencies(rng, requests, tau) for _ in range(runs)]
    tables = [
        request_replicates({"x": Clusters.singletons(values)}, STATISTICS, seed=seed + j)["x"]
        for j, values in enumerate(drawn)
    ]
    out = {}
    for column, name in enumerate(STATISTICS):
        estimate = float(np.mean([statistic(values, name) for values in drawn]))
        replicates = [table[:, column] for table in tables]
        plain = percentile_interval(two_level_replicates(replicates, seed=seed))
        ours = point_interval(estimate, replicates, seed=seed)
        out[name] = (estimate, *plain, *ours)
    return out


def main() -> None:
    """Print the coverage table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--trials", type=int, default=300, help="simulated points a cell")
    parser.add_argument("--requests", type=int, default=200, help="requests a run")
    args = parser.parse_args()
    rng = np.random.default_rng(1)
    print(f"nominal coverage 95 %; {args.trials} points a cell, {args.requests} requests a run")
    header = ("tau", "runs", "stat", "plain cover", "loadgen cover", "plain width", "loadgen width")
    print("{:>5} {:>4} {:>6} {:>11} {:>13} {:>11} {:>13}".format(*header))
    for tau in (0.0, 0.1, 0.3):
        truth = truths(rng, args.requests, tau)
        for runs in (3, 5, 10):
            held = {name: np.zeros(4) for name in STATISTICS}
            for t in range(args.trials):
                for name, (_, p_low, p_high, low, high) in trial(
                    rng, runs, args.requests, tau, seed=1000 * t
                ).items():
                    true = truth[name]
                    held[name] += (
                        p_low <= true <= p_high,
                        low <= true <= high,
                        (p_high - p_low) / true,
                        (high - low) / true,
                    )
            for name in STATISTICS:
                cover, ours, width, our_width = held[name] / args.trials
                print(
                    f"{tau:5.1f} {runs:4d} {name:>6} {cover:11.1%} {ours:13.1%} "
                    f"{width:11.1%} {our_width:13.1%}",
                    flush=True,
                )


if __name__ == "__main__":
    main()
