"""End to end: the real CLI scrapes the server's /metrics during the run into the records file
(read back with read_records), scrapes --telemetry-url exporters the same way without the
server's headers, and a telemetry endpoint that is slow, missing, too big or garbage costs one
note while the run completes."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from helpers import asyncio_server, cli, run_against_mock, run_in_process

import loadgen.server.scraper as scraper
from loadgen.fleet.fanout import START_LEAD_NS
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records

SHORT = ["--num-prompts", "60", "--request-rate", "100", "--random-input-len", "16"]
SHORT += ["--random-output-len", "8", "--disable-tqdm", "--server-metrics-interval", "0.05"]

DCGM_PAGE = b"""\
# TYPE DCGM_FI_DEV_GPU_UTIL gauge
DCGM_FI_DEV_GPU_UTIL{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 97
# TYPE DCGM_FI_DEV_POWER_USAGE gauge
DCGM_FI_DEV_POWER_USAGE{gpu="0",UUID="GPU-a",modelName="NVIDIA H100",Hostname="n1"} 612.5
"""
HUGE_BYTES = 200_000  # over the cap the tests set (scraper.MAX_PAGE_BYTES)


@contextmanager
def exporter(mode: str, seen: list[bytes] | None = None) -> Iterator[str]:
    """A Prometheus exporter on 127.0.0.1 that answers as ``mode`` says: a DCGM page, never
    (slow), the page once and then never (hangs-later), 404 (missing), a body over the cap
    (huge) or bytes that are no Prometheus text (garbage); its /metrics URL. ``seen``: each
    request's head, as it came."""
    asked: list[bytes] = []

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while head := await reader.readuntil(b"\r\n\r\n"):
            asked.append(head)
            if seen is not None:
                seen.append(head)
            if mode == "slow" or (mode == "hangs-later" and len(asked) > 1):
                await asyncio.sleep(3600)
            status, body = {
                "dcgm": (b"200 OK", DCGM_PAGE),
                "hangs-later": (b"200 OK", DCGM_PAGE),
                "missing": (b"404 Not Found", b"404 page not found\n"),
                "huge": (b"200 OK", b"a_metric 1\n" * (HUGE_BYTES // 11 + 1)),
                "garbage": (b"200 OK", b"\x00\xff{{{ not prometheus <html>\n" * 4),
            }[mode]
            writer.write(
                b"HTTP/1.1 " + status + b"\r\nContent-Type: text/plain\r\n"
                b"Content-Length: %d\r\n\r\n" % len(body) + body
            )
            await writer.drain()

    with asyncio_server(serve) as port:
        yield f"http://127.0.0.1:{port}/metrics"


def records_of(folder: Path) -> RunRecords:
    (path,) = folder.glob("*.records.arrow")
    return read_records(str(path))


def series_names(records: RunRecords, source_end: str = "") -> set[str]:
    return {s.name for s in records.server_metrics or [] if s.source.endswith(source_end)}


@pytest.mark.parametrize("personality", ["vllm", "sglang", "llamacpp", "tgi"])
def test_the_servers_series_are_in_the_records(tmp_path: Path, personality: str) -> None:
    run = run_against_mock(
        *SHORT, "--save-result", "--result-dir", str(tmp_path),
        mock_args=("--personality", personality),
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    assert "server metrics" not in (run.proc.stdout + run.proc.stderr).lower()
    records = records_of(tmp_path)
    assert records.end is not None
    by_name = {s.name: s for s in records.server_metrics or []}
    assert {"requests_running", "prompt_tokens", "generation_tokens"} <= set(by_name)
    generated = by_name["generation_tokens"]
    assert len(generated.t_ns) >= 2
    # On the run's clock: from t0 on, in order, no later than the run's last request ended.
    last_end = int(records.records["end_ns"].max())
    assert generated.t_ns[0] >= 0 and (generated.t_ns[1:] > generated.t_ns[:-1]).all()
    assert generated.t_ns[-1] <= last_end + 1_000_000_000
    # A counter only grows; the server counted the run's tokens (and the warm-up's) by its end.
    assert (generated.values[1:] >= generated.values[:-1]).all()
    assert generated.values[-1] <= records.end.output_lens.sum() + 8


@pytest.mark.parametrize("personality", ["vllm", "sglang", "llamacpp", "tgi"])
def test_the_counters_growth_over_the_series_is_the_whole_run(
    tmp_path: Path, personality: str
) -> None:
    """A run shorter than one scrape interval has two scrapes, just before t0 (stamped 0) and
    after its last request: the server's generation-token counter grew by the run's output
    tokens. The mock's first tokens come 300 ms after t0, as a server's after its prefill: a
    loaded machine may delay the first scrape past t0, not past them."""
    run = run_against_mock(
        "--num-prompts", "24", "--request-rate", "inf", "--max-concurrency", "8",
        "--random-input-len", "16", "--random-output-len", "12", "--ignore-eos",
        "--disable-tqdm", "--server-metrics-interval", "600", "--save-result", "--result-dir",
        str(tmp_path), mock_args=("--personality", personality, "--ttft-ms", "300"), itl_ms=2,
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    records = records_of(tmp_path)
    assert records.end is not None and (records.records["success"] == 1).all()
    (generated,) = [s for s in records.server_metrics or [] if s.name == "generation_tokens"]
    first, last = generated.t_ns
    assert 0 <= first < START_LEAD_NS + 300_000_000
    assert last >= int(records.records["end_ns"].max())
    assert generated.values[-1] - generated.values[0] == records.end.output_lens.sum() == 24 * 12


def test_an_endpoint_that_hangs_at_the_end_costs_a_note_and_the_bound(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(scraper, "FINAL_TIMEOUT_S", 0.3)
    with exporter("hangs-later") as url:
        proc = run_in_process(
            "--mock", *SHORT[:-1], "600", "--telemetry-url", url, "--save-result",
            "--result-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    notes = [line for line in (proc.stdout + proc.stderr).splitlines() if url in line]
    assert len(notes) == 1 and "no page within 0.3 s at the run's end" in notes[0], notes
    records = records_of(tmp_path)
    gpu = [s for s in records.server_metrics or [] if s.source == url]
    assert gpu and all(len(s.t_ns) == 1 for s in gpu)  # the scrape before t0, kept
    # The mock's own series are there (whether its final scrape made the bound on a loaded
    # machine is the unit tests' to check, with clients that answer when told).
    assert [s for s in records.server_metrics or [] if s.source != url]


def test_a_server_without_metrics_is_not_scraped_nor_noted(tmp_path: Path) -> None:
    # The mock's last personality: an OpenAI-like API (a key required) with no /metrics (404).
    run = run_against_mock(
        *SHORT, "--save-result", "--result-dir", str(tmp_path),
        "--header", "Authorization=Bearer sk-test", mock_args=("--personality", "openai"),
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    assert "server metrics" not in (run.proc.stdout + run.proc.stderr).lower()
    assert records_of(tmp_path).server_metrics is None


def test_no_server_metrics_scrapes_nothing(tmp_path: Path) -> None:
    run = run_against_mock(
        *SHORT, "--no-server-metrics", "--save-result", "--result-dir", str(tmp_path)
    )
    assert run.proc.returncode == 0
    assert records_of(tmp_path).server_metrics is None


def test_a_dcgm_exporter_is_scraped_without_the_servers_headers(tmp_path: Path) -> None:
    seen: list[bytes] = []
    with exporter("dcgm", seen) as url:
        proc = run_in_process(
            "--mock", *SHORT, "--telemetry-url", url, "--header", "Authorization=Bearer s3cret",
            "--save-result", "--result-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert seen and not any(b"s3cret" in head for head in seen)
    records = records_of(tmp_path)
    gpu = [s for s in records.server_metrics or [] if s.source == url]
    assert {(s.name, json.dumps(s.labels)) for s in gpu} == {
        ("gpu_utilization_pct", '{"gpu": "0"}'),
        ("gpu_power_w", '{"gpu": "0"}'),
    }
    assert series_names(records, "/metrics") >= {"requests_running"}  # the mock's, beside


@pytest.mark.parametrize(
    ("mode", "why"),
    [
        ("slow", "cannot reach"),
        ("missing", "404"),
        ("huge", f"over {HUGE_BYTES // 2} bytes"),
        ("garbage", "not Prometheus text"),
    ],
)
def test_a_bad_endpoint_costs_one_note_and_never_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, why: str
) -> None:
    monkeypatch.setattr(scraper, "MAX_PAGE_BYTES", HUGE_BYTES // 2)
    with exporter(mode) as url:
        proc = run_in_process(
            "--mock", *SHORT, "--telemetry-url", url, "--save-result", "--result-dir",
            str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    output = (proc.stdout + proc.stderr).splitlines()
    notes = [line for line in output if "server metrics" in line.lower()]
    assert len(notes) == 1, notes
    assert url in notes[0] and why in notes[0], notes[0]
    records = records_of(tmp_path)
    assert records.end is not None and (records.records["success"] == 1).all()
    assert not [s for s in records.server_metrics or [] if s.source == url]
    assert "requests_running" in series_names(records)  # the server's own, unharmed


def test_the_servers_figures_reach_the_result_and_loadgen_report_rebuilds_them(
    tmp_path: Path,
) -> None:
    """A closed loop of 8 against a vLLM mock running 2 at a time: the server queued, its KV
    cache held tokens, it never preempted; the result JSON's loadgen.server says so, the
    verdict names the queue, and `loadgen report` on the records writes the same."""
    live = tmp_path / "live"
    run = run_against_mock(
        "--num-prompts", "40", "--request-rate", "inf", "--max-concurrency", "8",
        "--random-input-len", "32", "--random-output-len", "8", "--ignore-eos", "--disable-tqdm",
        "--server-metrics-interval", "0.05", "--save-result", "--result-dir", str(live),
        mock_args=("--max-running", "2", "--kv-cache-tokens", "1024"), itl_ms=5,
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stdout + run.proc.stderr
    (path,) = live.glob("*.json")
    result = json.loads(path.read_text())
    server = result["loadgen"]["server"]
    assert server["server_waiting_peak"] > 0 and server["server_queued_pct"] > 10
    assert 0 < server["server_kv_cache_mean_pct"] <= server["server_kv_cache_peak_pct"] <= 100
    assert server["server_preemptions"] == 0
    assert server["server_prefix_cache_hit_rate"] is None  # the mock keeps no cache here
    assert "| server: it queued requests for" in result["loadgen"]["verdict"]
    rebuilt = tmp_path / "rebuilt"
    (records,) = live.glob("*.records.arrow")
    proc = cli("report", str(records), "--save-result", "--result-dir", str(rebuilt))
    assert proc.returncode == 0, proc.stderr
    (again,) = rebuilt.glob("*.json")
    assert {**json.loads(again.read_text()), "date": None} == {**result, "date": None}
