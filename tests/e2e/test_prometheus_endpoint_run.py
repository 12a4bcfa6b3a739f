"""End to end: --prometheus-port serves loadgen's live metrics during a real run, read with
prometheus_client's parser while the run goes; a port that is taken fails the run in one line."""

from __future__ import annotations

import socket
import threading
import urllib.request
from pathlib import Path

from helpers import free_port, run_in_process
from prometheus_client.parser import text_string_to_metric_families

RUN = ["--mock", "--mock-itl-ms", "5", "--num-prompts", "120", "--max-concurrency", "8"]
RUN += ["--random-input-len", "16", "--random-output-len", "40", "--disable-tqdm"]


def poll(
    url: str, pages: list[str], done: threading.Event, refused: list[int] | None = None
) -> None:
    """Every 50 ms until ``done``: the page at ``url`` when it answers; with ``refused``, the
    number of pages read so far at each try it did not answer."""
    while not done.wait(0.05):
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                pages.append(response.read().decode())
        except OSError:
            if refused is not None:
                refused.append(len(pages))


def test_the_endpoint_is_scraped_during_the_run() -> None:
    port = free_port()
    pages: list[str] = []
    done = threading.Event()
    poller = threading.Thread(target=poll, args=(f"http://127.0.0.1:{port}/metrics", pages, done))
    poller.start()
    try:
        proc = run_in_process(*RUN, "--prometheus-port", str(port), "--label", "e2e")
    finally:
        done.set()
        poller.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert pages, "the endpoint never answered during the run"
    values: dict[str, float] = {}
    for family in text_string_to_metric_families(pages[-1]):
        for sample in family.samples:
            assert sample.labels["run"] == "e2e" and sample.labels["model"] == "loadgen-mock"
            if sample.name == "loadgen_requests_total":
                values[f"requests_{sample.labels['outcome']}"] = sample.value
            elif "le" not in sample.labels:
                values[sample.name] = sample.value
    assert 0 < values["requests_completed"] <= 120
    assert values["requests_failed"] == 0
    assert values["loadgen_output_tokens_total"] == 40 * values["requests_completed"]
    # Finished answers' events at least (more when the last page saw answers still streaming).
    assert values["loadgen_streamed_tokens_total"] >= values["loadgen_output_tokens_total"]
    assert values["loadgen_ttft_seconds_count"] == values["requests_completed"]
    assert values["loadgen_itl_seconds_count"] == 39 * values["requests_completed"]
    assert values["loadgen_client_cpu_seconds_total"] > 0
    # Gone with the run: nothing listens on the port afterwards.
    with socket.socket() as sock:
        assert sock.connect_ex(("127.0.0.1", port)) != 0


def test_a_port_that_is_taken_fails_the_run_in_one_line() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        proc = run_in_process(*RUN, "--prometheus-port", str(port))
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert f"--prometheus-port {port}: cannot listen on 127.0.0.1:{port}" in last, last


def test_a_campaign_keeps_one_endpoint_open_and_labels_each_point(tmp_path: Path) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/metrics"
    pages: list[str] = []
    refused: list[int] = []
    done = threading.Event()
    poller = threading.Thread(target=poll, args=(url, pages, done, refused))
    poller.start()
    try:
        proc = run_in_process(
            *RUN, "--max-concurrency", "2,4", "--num-prompts", "60", "--prometheus-port",
            str(port), "--label", "e2e", "--result-dir", str(tmp_path),
        )  # fmt: skip
    finally:
        done.set()
        poller.join()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    points = {
        sample.labels["point"]
        for page in pages
        for family in text_string_to_metric_families(page)
        for sample in family.samples
    }
    assert points == {
        "max_concurrency=2-request_rate=inf run=0",
        "max_concurrency=4-request_rate=inf run=0",
    }
    # Open from the first page to the last: never refused between two that answered.
    assert not [n for n in refused if 0 < n < len(pages)], refused
    with socket.socket() as sock:  # closed with the campaign
        assert sock.connect_ex(("127.0.0.1", port)) != 0
