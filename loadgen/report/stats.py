"""Statistics of one sample: the one place that computes mean, median, std, max and percentiles.

Every figure a report, the verdict or ``loadgen calibrate`` shows comes from ``sample_stats``, with
numpy's own operations (``np.mean``, ``np.median``, ``np.std`` with ddof 0, ``np.percentile`` with
linear interpolation, ``np.max``) on the sample as float64, each result scaled after it is taken
(``float(np.mean(x)) * scale``), so the values are upstream's to the last bit.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SampleStats:
    """count, mean, median, population std, max and the asked-for percentiles of one sample.

    ``percentiles`` holds ``(p, value)`` pairs in the order asked. Every value is already scaled;
    for an empty sample every value is the ``empty`` given to ``sample_stats`` and count is 0.
    """

    count: int
    mean: float
    median: float
    std: float
    max: float
    percentiles: list[tuple[float, float]]

    def at(self, p: float) -> float:
        """The value of percentile ``p``, which must be one of those asked for."""
        for q, value in self.percentiles:
            if q == p:
                return value
        raise KeyError(f"percentile {p} was not computed (have {[q for q, _ in self.percentiles]})")


def sample_stats(
    values: Sequence[float] | np.ndarray,
    percentiles: Sequence[float] = (),
    *,
    scale: float = 1.0,
    empty: float = 0.0,
) -> SampleStats:
    """Statistics of ``values`` times ``scale`` (1000 turns seconds into ms); ``empty`` for every
    figure of an empty sample (0.0 as upstream reports it, NaN where "no data" must show)."""
    x = np.asarray(values, dtype=np.float64)
    if not len(x):
        return SampleStats(0, empty, empty, empty, empty, [(p, empty) for p in percentiles])
    at = np.percentile(x, list(percentiles)) if len(percentiles) else ()
    return SampleStats(
        count=len(x),
        mean=float(np.mean(x)) * scale,
        median=float(np.median(x)) * scale,
        std=float(np.std(x)) * scale,
        max=float(np.max(x)) * scale,
        percentiles=[(p, float(v) * scale) for p, v in zip(percentiles, at, strict=True)],
    )
