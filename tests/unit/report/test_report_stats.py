"""``loadgen.report.stats.sample_stats``: the one helper behind every mean/median/percentile."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.report.stats import SampleStats, sample_stats


def test_figures_are_numpys_own_population_std_and_linear_percentiles() -> None:
    s = sample_stats([4.0, 1.0, 2.0, 3.0], [25, 50, 99.9])
    assert s.count == 4
    assert (s.mean, s.median, s.max) == (2.5, 2.5, 4.0)
    assert s.std == pytest.approx(math.sqrt(1.25))  # ddof=0
    assert s.percentiles == [(25, 1.75), (50, 2.5), (99.9, pytest.approx(3.997))]
    assert s.at(99.9) == pytest.approx(3.997)


def test_scale_is_applied_after_each_figure_to_the_last_bit() -> None:
    x = np.random.default_rng(0).exponential(0.05, 1001)
    s = sample_stats(x, [50.0, 99.0, 99.9], scale=1000)
    assert s.mean == float(np.mean(x)) * 1000
    assert s.median == float(np.median(x)) * 1000
    assert s.std == float(np.std(x)) * 1000
    assert s.max == float(np.max(x)) * 1000
    for p, value in s.percentiles:
        assert value == float(np.percentile(x, p)) * 1000


def test_percentiles_keep_the_order_asked_and_none_gives_none() -> None:
    s = sample_stats(np.arange(101.0), [99, 50, 99])
    assert s.percentiles == [(99, 99.0), (50, 50.0), (99, 99.0)]
    assert sample_stats([1.0, 2.0]).percentiles == []


def test_empty_sample_gives_the_empty_value_everywhere() -> None:
    assert sample_stats(np.zeros(0), [50, 99]) == SampleStats(
        0, 0.0, 0.0, 0.0, 0.0, [(50, 0.0), (99, 0.0)]
    )
    s = sample_stats([], [99], scale=1000, empty=math.nan)
    assert s.count == 0
    assert all(math.isnan(v) for v in (s.mean, s.median, s.std, s.max, s.at(99)))


def test_integers_are_taken_as_float64() -> None:
    s = sample_stats(np.array([1, 2], dtype=np.int64), [50])
    assert (s.mean, s.median, s.at(50)) == (1.5, 1.5, 1.5)
    assert isinstance(s.max, float)


def test_a_percentile_not_asked_for_is_an_error() -> None:
    with pytest.raises(KeyError):
        sample_stats([1.0], [50]).at(99)
