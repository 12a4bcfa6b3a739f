"""What the report makes of the server's own figures and connection habits: upstream's
server_queue_times / server_ttfts keys, and the console notes on re-sent requests."""

from __future__ import annotations

import math

import numpy as np

from loadgen.report.result_json import server_metric_keys
from loadgen.report.summary import connection_notes
from workers.protocol import ConnectionStats


def test_server_metrics_become_upstreams_lists_with_none_for_requests_without():
    queue = np.array([0.001, math.nan, 0.0])
    ttft = np.array([0.040, math.nan, math.nan])
    assert server_metric_keys(queue, ttft) == {
        "server_queue_times": [0.001, None, 0.0],
        "server_ttfts": [0.040, None, None],
    }


def test_no_server_metrics_means_no_keys_as_upstream():
    nothing = np.full(3, math.nan)
    assert server_metric_keys(nothing, nothing) == {}


def test_connection_notes_only_when_the_server_did_something():
    assert connection_notes(ConnectionStats(preopened_at_t0=8)) == []
    notes = connection_notes(
        ConnectionStats(preopened_at_t0=8, closed_before_use=3, resent=4, reuse_stopped=True)
    )
    assert len(notes) == 3
    assert notes[0].startswith("note: 4 requests were re-sent once on a fresh connection")
    assert "no longer reused" in notes[1]
    assert "closed 3 of the 8 connections open at t0" in notes[2]
