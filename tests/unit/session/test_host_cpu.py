"""Where the host's CPUs went, from hand-made /proc readings; and the figures' way through the
records file. No sockets, no processes."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import numpy as np
import pytest

from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.collected import Collected
from loadgen.records.model import HostUsage, RunEnd, RunStart
from loadgen.records.read import read_records
from loadgen.session.host_cpu import (
    CpuTimes,
    ProcessTime,
    _Window,
    holds_socket,
    host_usage,
    listening_inodes,
    local_server_port,
    parse_cpu_times,
    parse_process_stat,
    read_cpu_times,
)
from workers.protocol import RECORD_DTYPE, UNSENT_ROW, ConnectionStats

PROC_STAT = """cpu  2020875 10 272385 3241041 5508 7 12149 1612 500 0
cpu0 887125 5 126073 1755099 981 3 5553 799 250 0
cpu1 1133750 5 146312 1485941 4526 4 6595 813 250 0
intr 1 2 3
ctxt 99
"""


def test_proc_stat_totals_and_the_cpu_count() -> None:
    parsed = parse_cpu_times(PROC_STAT.splitlines())
    assert parsed is not None
    times, cpus = parsed
    assert cpus == 2
    # user nice system idle iowait irq softirq steal; guest (500) is inside user already.
    assert times == CpuTimes(
        total=2020875 + 10 + 272385 + 3241041 + 5508 + 7 + 12149 + 1612,
        idle=3241041 + 5508,
        steal=1612,
        processes=2020875 + 10 + 272385,
    )


def test_a_stat_file_that_is_not_linuxs_is_not_measured(tmp_path: Path) -> None:
    assert parse_cpu_times(["something else"]) is None
    assert parse_cpu_times([]) is None
    assert read_cpu_times(str(tmp_path / "no-such-file")) is None


def test_process_stat_is_read_past_a_name_with_spaces_and_parentheses() -> None:
    # Fields after the name: state ppid pgrp session tty tpgid flags minflt cminflt majflt
    # cmajflt utime stime ...
    line = "4242 (my (odd) name) R 17 4242 4242 0 -1 4194304 10 0 0 0 250 31 0 0 20 0 1 0"
    assert parse_process_stat(line) == ProcessTime(ticks=281, name="my (odd) name", parent=17)
    assert parse_process_stat("4242 (cut") is None
    assert parse_process_stat("4242 (short) R 1") is None


def window(run_ms: float, wait_ms: float, at_ms: float) -> _Window:
    return _Window(int(run_ms * 1e6), int(wait_ms * 1e6), int(at_ms * 1e6))


def test_the_shares_of_all_cpus_time_over_the_run() -> None:
    me, worker, gone, mock, hog, idle = 100, 101, 102, 103, 500, 501
    # 2 CPUs for 1 s at 100 ticks/s: 200 ticks in all.
    start = CpuTimes(total=10_000, idle=5_000, steal=100, processes=4_800)
    end = CpuTimes(total=10_200, idle=5_040, steal=110, processes=4_950)
    before = {
        me: ProcessTime(1_000, "loadgen", 1),
        worker: ProcessTime(200, "python", me),
        gone: ProcessTime(200, "python", me),
        mock: ProcessTime(50, "python", me),
        hog: ProcessTime(7_000, "stress", 1),
        idle: ProcessTime(3, "sleepy", 1),
    }
    after = {
        me: ProcessTime(1_010, "loadgen", 1),
        worker: ProcessTime(230, "python", me),
        # the second worker has exited: its last reading counts
        mock: ProcessTime(70, "python", me),
        hog: ProcessTime(7_080, "stress", 1),
        idle: ProcessTime(3, "sleepy", 1),
    }
    usage = host_usage(
        start,
        end,
        cpus=2,
        wall_ns=1_000_000_000,
        before=before,
        after=after,
        me=me,
        worker_ticks={worker: 230, gone: 210},
        worker_windows={
            worker: (window(0, 0, 0), window(300, 100, 1000)),
            gone: (window(0, 0, 0), window(100, 0, 1000)),
        },
        peak={worker: (95.0, 90.0), gone: (12.0, 11.0)},
    )
    assert usage == HostUsage(
        cpus=2,
        wall_s=1.0,
        loadgen_pct=100 * (10 + 30 + 10) / 200,
        started_pct=100 * 20 / 200,
        other_pct=100 * (150 - 50 - 20) / 200,  # the hog's 80 ticks
        steal_pct=100 * 10 / 200,
        idle_pct=100 * 40 / 200,
        busiest_name="stress",
        busiest_pid=hog,
        busiest_pct=100 * 80 / 200,
        busiest_started=False,
        worker_demand_pct=[40.0, 10.0],
        worker_wait_pct=[10.0, 0.0],
        worker_peak_demand_pct=[95.0, 12.0],
        worker_peak_cpu_pct=[90.0, 11.0],
    )


def test_the_mock_server_is_told_apart_and_no_share_is_negative() -> None:
    me, mock = 10, 11
    start = CpuTimes(total=0, idle=0, steal=0, processes=0)
    # Tick accounting is coarse: processes' own counts may exceed /proc/stat's by a tick.
    end = CpuTimes(total=100, idle=60, steal=0, processes=39)
    usage = host_usage(
        start,
        end,
        2,
        500_000_000,
        before={me: ProcessTime(0, "loadgen", 1), mock: ProcessTime(0, "python", me)},
        after={me: ProcessTime(10, "loadgen", 1), mock: ProcessTime(30, "python", me)},
        me=me,
        worker_ticks={},
        worker_windows={},
        peak={},
    )
    assert (usage.started_pct, usage.other_pct) == (30.0, 0.0)
    assert (usage.busiest_pid, usage.busiest_started) == (mock, True)
    assert usage.worker_demand_pct == []


@pytest.mark.parametrize("host", [None, "measured"])
def test_host_figures_go_through_the_records_file(tmp_path: Path, host: str | None) -> None:
    usage = HostUsage(
        cpus=2,
        wall_s=3.5,
        loadgen_pct=6.0,
        started_pct=2.5,
        other_pct=71.0,
        steal_pct=0.5,
        idle_pct=20.0,
        busiest_name="stress",
        busiest_pid=99,
        busiest_pct=46.0,
        busiest_started=False,
        worker_demand_pct=[7.5, 6.25],
        worker_wait_pct=[4.0, 3.0],
        worker_peak_demand_pct=[39.0, 13.0],
        worker_peak_cpu_pct=[18.0, 5.5],
    )
    start = RunStart(
        loadgen_version="0.1.0",
        command_line=["loadgen", "run"],
        config={"backend": "openai", "request_rate": 1.0, "headers": {}},
        model_id="m",
        tokenizer_id="m",
        num_requests=1,
        num_workers=2,
        connections=0,
        schedule_sha256="ab" * 8,
        t0_ns=0,
        t0_wall="",
        counters_before=None,
    )
    path = tmp_path / "r.records.arrow"
    writer = RecordsWriter(
        str(path), start, np.zeros(1, np.int64), np.ones(1, np.int64), np.ones(1, np.int64), None
    )
    writer.start(1, "2026-12-03T10:00:00", 0)
    records = np.array([UNSENT_ROW], dtype=RECORD_DTYPE)
    records["index"] = 0
    collected = Collected(
        records=records,
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.zeros(2, np.int64),
        errors={0: "lost"},
        texts={},
        t0_ns=1,
        connections=0,
        worker=np.array([-1], np.int16),
    )
    end = RunEnd(
        interrupted=False,
        worker_problems=[],
        worker_cpu_ns=[1, 2],
        worker_wall_ns=[3, 4],
        connection_stats=ConnectionStats(),
        loop_lag_ns=np.zeros(0, np.int64),
        output_lens=np.zeros(1, np.int64),
        counters_after=None,
        probe_latencies_s=None,
        host=usage if host else None,
    )
    writer.finish(collected, end)
    run = read_records(str(path))
    assert run.end is not None
    assert run.end.host == (usage if host else None)


def test_the_busiest_process_is_the_server_if_it_or_a_parent_listens() -> None:
    me, api, engine, hog = 10, 20, 21, 30
    start = CpuTimes(total=0, idle=0, steal=0, processes=0)
    end = CpuTimes(total=100, idle=20, steal=0, processes=80)
    before = {
        pid: ProcessTime(0, name, 1) for pid, name in [(me, "loadgen"), (api, "vllm"), (hog, "hog")]
    }
    before[engine] = ProcessTime(0, "EngineCore", api)

    def busiest_serves(engine_ticks: int, listener: int) -> bool:
        after = {
            **before,
            engine: ProcessTime(engine_ticks, "EngineCore", api),
            hog: ProcessTime(20, "hog", 1),
        }
        usage = host_usage(
            start, end, 2, 10**9, before, after, me, {}, {}, {}, serves=lambda pid: pid == listener
        )
        return usage.busiest_serves

    assert busiest_serves(50, listener=api)  # vLLM's engine core, under its listening API server
    assert not busiest_serves(50, listener=99)  # another process listens
    assert not busiest_serves(5, listener=api)  # the hog is the busiest


def test_a_listening_socket_is_found_by_its_port() -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        inodes = listening_inodes(port)
        assert inodes and holds_socket(os.getpid(), inodes)
    assert not holds_socket(os.getpid(), listening_inodes(port))


@pytest.mark.parametrize(
    ("url", "port"),
    [
        ("http://127.0.0.1:8000", 8000),
        ("http://localhost", 80),
        ("https://[::1]:9443/v1", 9443),
        ("http://10.1.2.3:8000", None),
        ("http://gpu-box.example:8000", None),
    ],
)
def test_only_a_server_on_this_host_has_a_local_port(url: str, port: int | None) -> None:
    assert local_server_port(url) == port
