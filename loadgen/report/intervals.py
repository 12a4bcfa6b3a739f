"""Confidence intervals of a campaign point's figures, honest with few runs: pure numpy, seeded
(the same samples give the same interval, to the last bit).

- Fewer than ``MIN_RUNS`` runs at a point: no interval (``no_interval_reason`` says why). Two
  runs' Student t interval is 12.7 standard errors wide and reaches below 0 ms.
- A statistic of requests (a latency's mean, median or percentile): a two-level bootstrap, over
  the point's runs and each run's requests. ``request_replicates`` draws a run's requests with
  replacement ``REQUEST_RESAMPLES`` times (a request's values, its ITL gaps, travel together: a
  cluster bootstrap) and recomputes the statistics; ``two_level_replicates`` draws the runs with
  replacement, each drawn run giving one of its own replicates (a different one each time it
  is drawn), and averages them, as the point's value is the mean of its runs' values. The
  interval is the 2.5th and 97.5th percentiles of those replicates (``percentile_interval``),
  so it never leaves the range of the values measured: never below 0 for a latency.
- A figure measured once a run (a throughput, a count): Student's t interval of the runs'
  values, clipped to the figure's range (``runs_interval``: at 0 for a throughput, at 100 for a
  percentage); with 3 runs a bootstrap over runs would only span their min and max.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MIN_RUNS = 3
CONFIDENCE = 0.95
RESAMPLES = 1000  # the two-level bootstrap's replicates
# Each run's replicates over its requests. The two-level bootstrap draws a run's about
# RESAMPLES times in all (k slots a replicate, 1/k of them the run's), so each is used about
# twice: half the cost that dominates `loadgen report` of a campaign of large runs.
REQUEST_RESAMPLES = 500
SEED = 0
# Two-sided 95 % quantiles of Student's t, by degrees of freedom (1..30).
T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip
Z975 = 1.959964
_CHUNK = 1 << 22  # elements of a replicates-by-requests block held at once
_CELLS = 32  # cells of a clustered quantile's band


def no_interval_reason(runs: int) -> str | None:
    """Why a point of ``runs`` counted runs shows no interval; None when it shows one."""
    if runs >= MIN_RUNS:
        return None
    return f"{runs} run(s) at this point; intervals need >= {MIN_RUNS} (--num-runs)"


def t_quantile_975(dof: int) -> float:
    """Student's t two-sided 95 % quantile for ``dof`` degrees of freedom (a table to 30, then
    the Cornish-Fisher expansion, within 0.001 of the exact value)."""
    if dof < 1:
        return math.nan
    if dof <= len(T975):
        return T975[dof - 1]
    z = Z975
    return z + (z**3 + z) / (4 * dof) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * dof**2)


def finite_mean(values: Sequence[float]) -> float:
    """The mean of the finite ``values`` (NaN when none is)."""
    finite = [v for v in values if v is not None and math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def runs_interval(
    values: Sequence[float], lower: float = 0.0, upper: float = math.inf
) -> tuple[float, float]:
    """Student's t 95 % interval of the mean of the finite ``values`` (one per run), clipped
    to ``[lower, upper]`` (the figure's range); NaN, NaN with fewer than ``MIN_RUNS``."""
    finite = np.array([v for v in values if v is not None and math.isfinite(v)], dtype=float)
    if len(finite) < MIN_RUNS:
        return math.nan, math.nan
    mean = float(finite.mean())
    half = t_quantile_975(len(finite) - 1) * float(finite.std(ddof=1)) / math.sqrt(len(finite))
    return max(mean - half, lower), min(mean + half, upper)


def percentile_interval(
    replicates: np.ndarray, confidence: float = CONFIDENCE
) -> tuple[float, float]:
    """The ``confidence`` percentile interval of bootstrap replicates (NaN ones left out);
    NaN, NaN when none is left."""
    kept = replicates[~np.isnan(replicates)]
    if not len(kept):
        return math.nan, math.nan
    tail = 100 * (1 - confidence) / 2
    low, high = np.percentile(kept, [tail, 100 - tail])
    return float(low), float(high)


def gather(values: np.ndarray, offsets: np.ndarray, picked: np.ndarray) -> np.ndarray:
    """The clusters ``picked`` (request r owns ``values[off[r]:off[r+1]]``), end to end."""
    starts = offsets[:-1][picked]
    sizes = np.diff(offsets)[picked]
    total = int(sizes.sum())
    # Each cluster's start repeated over its values, plus the position within it.
    begin = np.repeat(starts, sizes)
    within = np.arange(total) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    return values[begin + within]


def quantile_of(statistic: str) -> float | None:
    """The quantile a statistic names (``median`` 0.5, ``p99`` 0.99); None for ``mean``."""
    if statistic == "mean":
        return None
    if statistic == "median":
        return 0.5
    if statistic.startswith("p"):
        return float(statistic[1:]) / 100.0
    raise ValueError(f"unknown statistic {statistic!r}")


@dataclass(frozen=True)
class Clusters:
    """One sample of a run's requests: request r owns ``values[off[r]:off[r+1]]`` (one value
    each for a TTFT, none or many for ITL gaps), ``off`` the cumulative ``sizes``."""

    values: np.ndarray  # float, request-major
    sizes: np.ndarray  # int [R]

    @classmethod
    def singletons(cls, values: np.ndarray, requests: np.ndarray | None = None) -> Clusters:
        """One value per request of ``requests`` (a bool mask over the R requests; every
        request when None)."""
        if requests is None:
            return cls(np.asarray(values, float), np.ones(len(values), np.int64))
        return cls(np.asarray(values, float), requests.astype(np.int64))


def request_replicates(
    samples: dict[str, Clusters],
    statistics: Sequence[str],
    resamples: int = REQUEST_RESAMPLES,
    seed: int = SEED,
) -> dict[str, np.ndarray]:
    """For each sample, ``resamples`` bootstrap replicates (rows) of each statistic (columns:
    ``mean``, ``median``, ``pNN``, as numpy computes them with linear interpolation) of one run's
    requests, drawn with replacement; every sample must hold the same R requests.

    A mean's replicate is the mean of the values of the drawn requests, every sample's from the
    same draws: each request drawn a Poisson(1) number of times (the Poisson bootstrap, the
    multinomial's counts drawn independently: alike but for O(1/R)). A quantile of one value
    per request is drawn from its exact bootstrap distribution: the k-th smallest of n draws
    among the sorted values is the value of rank floor(n U) with U the k-th smallest of n
    uniforms, a Beta(k, n - k + 1) (the next one above: U + (1 - U) Beta(1, n - k)); so a
    replicate costs O(1), not a sort of n values. A quantile of clustered values (ITL) is the
    weighted quantile of the values under each draw's request counts (the means' draws), found
    within a band of ranks around the sample's quantile (``_band``)."""
    rng = np.random.default_rng(seed)
    first = next(iter(samples.values()), None)
    requests = 0 if first is None else len(first.sizes)
    largest = max((len(sample.values) for sample in samples.values()), default=0)
    # counts, and the counts of values below a rank, are whole numbers: float32 holds them
    # exactly below 2**24, and halves the products' cost
    exact = np.float32 if largest < 2**24 else np.float64
    counts = _request_counts(requests, resamples, rng, exact) if requests else None
    out = {name: np.full((resamples, len(statistics)), math.nan) for name in samples}
    if counts is None:
        return out
    # each sample's values and sums per request, all weighed by the counts in one product
    per_request = np.stack(
        [
            column
            for sample in samples.values()
            for column in (
                sample.sizes.astype(float),
                np.bincount(_owner(sample.sizes), sample.values, minlength=requests),
            )
        ],
        axis=1,
    )
    weighed = (counts @ per_request.astype(exact)).astype(float)
    for index, (name, sample) in enumerate(samples.items()):
        table = out[name]
        if not len(sample.values):
            continue
        totals, sums = weighed[:, 2 * index], weighed[:, 2 * index + 1]
        ordered = None  # the values' order, once a clustered quantile needs it
        for column, statistic in enumerate(statistics):
            q = quantile_of(statistic)
            if q is None:
                with np.errstate(invalid="ignore", divide="ignore"):
                    table[:, column] = sums / totals
            elif bool((sample.sizes <= 1).all()):
                table[:, column] = _order_statistic_replicates(sample.values, q, resamples, rng)
            else:
                if ordered is None:
                    ordered = np.argsort(sample.values, kind="stable")
                table[:, column] = _clustered_quantile(sample, ordered, q, counts, totals)
    return out


def _request_counts(
    requests: int, resamples: int, rng: np.random.Generator, dtype: type
) -> np.ndarray:
    """How many times each request is drawn, per replicate: [resamples, requests], each a
    Poisson(1) count (the Poisson bootstrap: the multinomial's counts, drawn independently, a
    random 16-bit number looked up in the Poisson(1) quantiles: a third of drawing indices and
    counting them)."""
    table: np.ndarray = _POISSON_1.astype(dtype, copy=False)
    return table[rng.integers(0, 1 << 16, (resamples, requests), np.uint16)]


def _poisson_1_quantiles() -> np.ndarray:
    """The Poisson(1) count of each of 2**16 equally likely 16-bit numbers."""
    cdf = np.cumsum([math.exp(-1) / math.factorial(k) for k in range(16)])
    return np.searchsorted(cdf * (1 << 16), np.arange(1 << 16) + 0.5).astype(np.float64)


_POISSON_1 = _poisson_1_quantiles()


def _owner(sizes: np.ndarray) -> np.ndarray:
    return np.repeat(np.arange(len(sizes)), sizes)


def _order_statistic_replicates(
    values: np.ndarray, q: float, resamples: int, rng: np.random.Generator
) -> np.ndarray:
    """np.percentile(draw, 100 q) of ``resamples`` draws of len(values) among ``values``."""
    n = len(values)
    ordered = np.sort(values)
    position = q * (n - 1)
    k = math.floor(position)  # 0-based rank of the lower order statistic
    frac = position - k
    u = rng.beta(k + 1, n - k, resamples)
    lower = ordered[np.minimum((n * u).astype(np.int64), n - 1)]
    if frac == 0 or k + 1 >= n:
        return lower
    u_next = u + (1 - u) * rng.beta(1, n - k - 1, resamples)
    upper = ordered[np.minimum((n * u_next).astype(np.int64), n - 1)]
    return lower + frac * (upper - lower)


def _clustered_quantile(
    sample: Clusters, ordered: np.ndarray, q: float, counts: np.ndarray, totals: np.ndarray
) -> np.ndarray:
    """Each replicate's quantile q of the values (``ordered``: their indices in increasing
    order), each weighted by its request's count: the band of ranks that holds it (``_band``)
    is cut in ``_CELLS`` cells, one product of the counts with each request's values per cell
    finds each replicate's cell, and the exact rank is counted within it."""
    values, sizes = sample.values, sample.sizes
    owner = _owner(sizes)
    with np.errstate(invalid="ignore"):
        position = q * (totals - 1)
    empty = ~(totals > 0)
    position[empty] = 0
    low_rank = np.floor(position)
    frac = position - low_rank
    high_rank = np.minimum(low_rank + 1, np.maximum(totals - 1, 0))
    start, stop, below = _band(owner[ordered], sizes, q, counts, np.where(empty, np.inf, low_rank))
    band_owner, band_values = owner[ordered[start:stop]], values[ordered[start:stop]]
    width = stop - start
    edges = np.linspace(0, width, min(_CELLS, width) + 1).astype(np.int64)
    cells = len(edges) - 1
    cell = np.repeat(np.arange(cells), np.diff(edges))
    per_cell = np.bincount(band_owner * cells + cell, minlength=len(sizes) * cells)
    upto = np.cumsum(per_cell.reshape(len(sizes), cells), axis=1).astype(counts.dtype)
    # each replicate's count of values ranked below each cell's end
    ends = below[:, None] + (counts @ upto).astype(float)
    starts = np.concatenate((below[:, None], ends[:, :-1]), axis=1)
    longest = int(np.diff(edges).max())
    step = np.arange(longest)
    rows = np.arange(len(totals))[:, None]
    picked = []
    for rank in (low_rank, high_rank):
        at = np.minimum((ends <= rank[:, None]).sum(axis=1), cells - 1)
        first = edges[at]
        spots = np.minimum(first[:, None] + step, width - 1)
        weights = counts[rows, band_owner[spots]].astype(float)
        weights[first[:, None] + step >= edges[at + 1][:, None]] = 0  # past the cell
        running = starts[rows[:, 0], at][:, None] + np.cumsum(weights, axis=1)
        within = np.minimum((running <= rank[:, None]).sum(axis=1), longest - 1)
        picked.append(band_values[np.minimum(first + within, width - 1)])
    low, high = picked
    out = low + frac * (high - low)
    out[empty] = math.nan
    return out


def _band(
    sorted_owner: np.ndarray, sizes: np.ndarray, q: float, counts: np.ndarray, low_rank: np.ndarray
) -> tuple[int, int, np.ndarray]:
    """The ranks [start, stop) of the sorted values (``sorted_owner``: the request of each)
    that hold every replicate's order statistics at ``low_rank`` and the next, and each
    replicate's count of values ranked below ``start``. The band starts at 5 of the linearised
    bootstrap's standard errors of the rank each side (the spread over requests of each one's
    count below the quantile, less its share) and doubles until every replicate's ranks fall
    in it."""
    n, requests = len(sorted_owner), len(sizes)
    centre = min(int(q * (n - 1)), n - 1)
    below_centre = np.bincount(sorted_owner[:centre], minlength=requests)
    spread = math.sqrt(float(np.square(below_centre - q * sizes).sum()))
    half = int(5 * spread) + 16
    drawn = np.isfinite(low_rank)  # replicates that drew a value at all
    while True:
        start, stop = max(centre - half, 0), min(centre + half + 2, n)
        under = np.bincount(sorted_owner[:start], minlength=requests).astype(counts.dtype)
        inside = np.bincount(sorted_owner[start:stop], minlength=requests).astype(counts.dtype)
        below = (counts @ under).astype(float)
        upto = below + (counts @ inside).astype(float)
        if (start == 0 or bool((below[drawn] <= low_rank[drawn]).all())) and (
            stop == n or bool((upto[drawn] > low_rank[drawn] + 1).all())
        ):
            return start, stop, below
        half *= 2


def two_level_replicates(
    run_replicates: Sequence[np.ndarray], resamples: int = RESAMPLES, seed: int = SEED
) -> np.ndarray:
    """Replicates of the mean over k runs of a statistic: each draws k runs with replacement,
    each drawn run giving one of its own request-level replicates (``run_replicates``, one
    array per run, all as long), a different one each time it is drawn in a replicate."""
    reps = np.stack([np.asarray(r, float) for r in run_replicates])
    k, per_run = reps.shape
    rng = np.random.default_rng(seed)
    runs = rng.integers(0, k, (resamples, k))
    columns = (np.arange(resamples)[:, None] + np.arange(k)[None, :]) % per_run
    return reps[runs, columns].mean(axis=1)


def runs_fixed_replicates(run_replicates: Sequence[np.ndarray]) -> np.ndarray:
    """Replicates of the mean over k runs of a statistic with the runs taken as they are (the
    requests' noise only): replicate b averages run j's replicate b + j."""
    reps = np.stack([np.asarray(r, float) for r in run_replicates])
    k, per_run = reps.shape
    columns = (np.arange(per_run)[:, None] + np.arange(k)[None, :]) % per_run
    return reps[np.arange(k)[None, :], columns].mean(axis=1)


def point_interval(
    estimate: float, run_replicates: Sequence[np.ndarray], seed: int = SEED
) -> tuple[float, float]:
    """The 95 % interval of a point's statistic of requests (``estimate``: the mean of its
    runs' values) from its runs' request-level replicates (two levels: runs and requests),
    widened to hold ``estimate`` where the percentiles leave it out; NaN, NaN with fewer than
    ``MIN_RUNS`` runs."""
    if len(run_replicates) < MIN_RUNS or not math.isfinite(estimate):
        return math.nan, math.nan
    low, high = percentile_interval(two_level_replicates(run_replicates, seed=seed))
    if not math.isfinite(low):
        return math.nan, math.nan
    return min(low, estimate), max(high, estimate)
