"""report.html's figure data (loadgen/report/html_figures.py): CDF points, time bins, throughput
and in-flight per bin, the Pareto front and the points' labels, on hand-made inputs."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loadgen.records.event_source import ArrayEvents
from loadgen.report.html_figures import (
    bin_count,
    cdf_points,
    completions_per_s,
    in_flight,
    pareto_front,
    point_label,
    spans_decades,
    time_bins,
    token_shares,
    tokens_per_s_chunked,
)


def test_a_small_sample_keeps_every_value_as_its_own_step() -> None:
    x, y = cdf_points(np.array([3.0, 1.0, np.nan, 2.0, 2.0]))
    assert x.tolist() == [1.0, 2.0, 2.0, 3.0]
    assert y.tolist() == [0.25, 0.5, 0.75, 1.0]


def test_an_empty_sample_has_no_points() -> None:
    x, y = cdf_points(np.zeros(0))
    assert len(x) == 0 and len(y) == 0


def test_a_large_sample_is_cut_to_the_bound_and_keeps_its_ends_and_tail() -> None:
    n = 1_000_000
    values = np.arange(n, dtype=float)[::-1]  # unsorted on purpose
    x, y = cdf_points(values, max_points=1000)
    assert len(x) <= 1000
    assert x[0] == 0.0 and y[0] == 1 / n  # the smallest
    assert x[-1] == n - 1 and y[-1] == 1.0  # the largest
    assert np.all(np.diff(x) > 0) and np.all(np.diff(y) > 0)
    assert np.array_equal(y, (x + 1) / n)  # each point is the exact CDF at its value
    # The top 1 % (where p99 and p99.9 live) has most of a quarter of the points, not 8.
    assert (y > 0.99).sum() >= 150
    assert (y > 0.999).sum() >= 100


def test_spans_decades_reads_the_positive_range() -> None:
    assert spans_decades(np.array([0.5, 60.0]))  # 120x
    assert not spans_decades(np.array([20.0, 40.0, 1999.0]))  # just under 100x
    assert not spans_decades(np.array([0.0, 5.0]))  # zeros are not on a log axis
    assert not spans_decades(np.array([7.0]))


def test_time_bins_cut_the_run_into_equal_bins_ending_at_its_end() -> None:
    bins = time_bins(2.5, 5)
    assert bins.edges.tolist() == [0.0, 0.5, 1.0, 1.5, 2.0, 2.5]
    assert bins.width_s == 0.5
    assert bins.centers.tolist() == [0.25, 0.75, 1.25, 1.75, 2.25]
    assert len(time_bins(3600.0).edges) == 101  # 100 bins by default
    assert time_bins(0.0).edges.tolist() == [0.0, 0.001]


def test_a_run_gets_100_bins_unless_it_has_under_5_completions_a_bin() -> None:
    assert bin_count(1_000_000) == 100
    assert bin_count(500) == 100
    assert bin_count(64) == 12
    assert bin_count(3) == 10


def test_completions_per_second_count_successes_by_their_end() -> None:
    bins = time_bins(3.0, 3)
    end = np.array([0.2, 0.7, 1.1, 2.2, 3.0])
    ok = np.array([True, True, False, True, True])
    assert completions_per_s(end, ok, bins).tolist() == [2.0, 0.0, 2.0]  # the end is in


def test_output_tokens_are_spread_over_their_events_and_add_up() -> None:
    offsets = np.array([0, 2, 3, 3, 5])  # 2 events, 1 event, none, 2 events
    output_lens = np.array([10, 4, 0, 6])
    ok = np.array([True, True, True, False])
    shares = token_shares(offsets, output_lens, ok)
    assert shares.tolist() == [5.0, 4.0, 0.0, 0.0]
    bins = time_bins(2.0, 4)
    events = ArrayEvents(np.array([0.2, 1.5, 1.6, 0.1, 0.2]), offsets)
    assert tokens_per_s_chunked(events, shares, bins).tolist() == [10.0, 0.0, 0.0, 18.0]


def test_in_flight_is_the_time_weighted_mean_and_the_peak_of_each_bin() -> None:
    # [0, 1.5) and [0.5, 1.0): bin 0 holds 1 request for 0.5 s and 2 for 0.5 s; bin 1 holds
    # one for 0.5 s of its 1 s; [2.0, 2.0) never counts. Back to back ([1.5, 1.9) after the
    # first) they never overlap: the peak of bin 1 stays 1.
    send = np.array([0.0, 0.5, 1.5])
    end = np.array([1.5, 1.0, 1.9])
    bins = time_bins(2.0, 2)
    mean, peak = in_flight(send, end, bins)
    assert mean.tolist() == pytest.approx([1.5, 0.9])
    assert peak.tolist() == [2.0, 1.0]


def test_in_flight_counts_a_request_across_the_bins_it_spans() -> None:
    bins = time_bins(4.0, 4)
    mean, peak = in_flight(np.array([0.5, 3.0]), np.array([2.25, 4.0]), bins)
    assert mean.tolist() == pytest.approx([0.5, 1.0, 0.25, 1.0])
    assert peak.tolist() == [1.0, 1.0, 1.0, 1.0]


def test_in_flight_of_no_requests_is_zero() -> None:
    mean, peak = in_flight(np.zeros(0), np.zeros(0), time_bins(1.0, 2))
    assert mean.tolist() == [0.0, 0.0] and peak.tolist() == [0.0, 0.0]


def test_the_pareto_front_of_a_hand_made_set() -> None:
    #          0      1      2      3      4      5      6
    tput = [100.0, 200.0, 150.0, 300.0, 300.0, 250.0, math.nan]
    lat = [10.0, 20.0, 30.0, 50.0, 60.0, 20.0, 1.0]
    # 2 is beaten by 1 (more throughput, less latency); 4 by 3 (same throughput, less
    # latency); 1 by 5 (same latency, more throughput); 6 has no throughput.
    assert pareto_front(tput, lat) == [0, 5, 3]


def test_equal_points_are_both_on_the_front() -> None:
    assert pareto_front([1.0, 1.0], [2.0, 2.0]) == [0, 1]
    assert pareto_front([], []) == []


def test_point_labels_name_what_varies() -> None:
    assert point_label(4, math.inf, caps_vary=True, rates_vary=False) == "c=4"
    assert point_label(None, 20.0, caps_vary=False, rates_vary=True) == "r=20/s"
    assert point_label(4, 2.5, caps_vary=True, rates_vary=True) == "c=4 r=2.5/s"
    assert point_label(16, math.inf, caps_vary=False, rates_vary=False) == "c=16"
    assert point_label(None, math.inf, caps_vary=False, rates_vary=False) == "r=inf/s"
