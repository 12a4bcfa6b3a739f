"""--slo and --search (issue 29, point 2) through the real CLI against the mock with a known
capacity (--max-running 4: four requests run at once, the rest queue): the grid's points are
marked and the best named; the concurrency search lands on 4, its probes and evidence in the
console, summary.csv, campaign.json and report.html; flags that cannot work are refused."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from helpers import cli, refusal, run_in_process

from loadgen.mock.process import EmbeddedMockServer

# Each request holds a slot 20 + 7 * 5 = 55 ms: with 4 streams or fewer none waits (TTFT about
# 20 ms), with 5 or more one in five or more waits a whole request (TTFT about 75 ms).
SLOTS, TTFT_MS, ITL_MS, TOKENS = 4, 20.0, 5.0, 8
# p90, not p99: on a busy machine one request in 40 may stall for reasons of its own; with 5
# streams or more one request in five waits.
SLO = "p90_ttft_ms<=45"
LOAD = ["--metric-percentiles", "90", "--num-prompts", "40", "--random-input-len", "16",
        "--random-output-len", str(TOKENS), "--workers", "1", "--disable-tqdm"]  # fmt: skip


def capped_mock() -> EmbeddedMockServer:
    return EmbeddedMockServer(TTFT_MS, ITL_MS, extra_args=("--max-running", str(SLOTS)))


def test_a_concurrency_search_finds_the_mocks_slot_count(tmp_path: Path) -> None:
    mock = capped_mock()
    url = mock.start()
    try:
        search = ["--search", "concurrency", "--slo", SLO, "--search-max", "16"]
        proc = run_in_process("--base-url", url, *search, *LOAD, "--result-dir", str(tmp_path))
    finally:
        mock.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = proc.stdout
    assert "Search for the highest concurrency within the SLO (p90_ttft_ms<=45):" in out
    assert "Highest concurrency within the SLO: 4 (bracket [4, 5]" in out, out
    assert "  probe 1: concurrency 1 run=0: meets the SLO" in out
    (folder,) = tmp_path.iterdir()
    assert folder.name.startswith("campaign-openai-search-concurrency-")
    document = json.loads((folder / "campaign.json").read_text())
    search = document["search"]
    assert (search["best"], search["bracket"]) == (4.0, [4.0, 5.0])
    loads = [probe["load"] for probe in search["probes"]]
    # Doubled until it failed, then bisected (a load near the line, on a busy machine, repeated).
    assert list(dict.fromkeys(loads))[:4] == [1.0, 2.0, 4.0, 8.0]
    assert set(loads) == {1.0, 2.0, 4.0, 8.0, 6.0, 5.0}
    for probe in search["probes"]:
        evidence = probe["estimates"]["p90_ttft_ms"]
        assert evidence["low"] <= evidence["value"] <= evidence["high"]
        assert probe["load_meets"] == (probe["load"] <= SLOTS)
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [row["max_concurrency"] for row in rows] == ["1", "2", "4", "5", "6", "8"]
    assert [row["slo_met"] for row in rows] == ["yes", "yes", "yes", "no", "no", "no"]
    assert document["slo"]["best_point"] == "max_concurrency=4-request_rate=inf"
    page = (folder / "report.html").read_text()
    assert "<h2>Search</h2>" in page and "Highest concurrency within the SLO: 4" in page
    assert "SLO met" in page
    # Printed again offline: the same table and the same account of the search.
    printed = cli("report", str(folder), "-q")
    assert printed.returncode == 0, printed.stderr
    assert printed.stdout.splitlines()[-1].startswith("Highest concurrency within the SLO: 4")
    assert printed.stdout in out
    again = tmp_path / "again.html"  # drawn offline from the folder, as the campaign drew it
    assert cli("report", str(folder), "--format", "html", "--output", str(again)).returncode == 0
    redrawn = again.read_text()
    assert "<h2>Search</h2>" in redrawn and "Highest concurrency within the SLO: 4" in redrawn
    assert "Highest throughput within the SLO (p90_ttft_ms&lt;=45)" in redrawn


def test_a_grid_with_an_slo_marks_each_point_and_names_the_best(tmp_path: Path) -> None:
    mock = capped_mock()
    url = mock.start()
    try:
        proc = run_in_process("--base-url", url, "--max-concurrency", "2,4,8", "--slo", SLO,
                              *LOAD, "--result-dir", str(tmp_path))  # fmt: skip
    finally:
        mock.stop()
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "SLO met" in proc.stdout
    best = "Highest throughput within the SLO (p90_ttft_ms<=45): max_concurrency=4-request_rate=inf"
    assert best in proc.stdout
    (folder,) = tmp_path.iterdir()
    rows = list(csv.DictReader((folder / "summary.csv").open()))
    assert [(row["slo_met_runs"], row["slo_met"]) for row in rows] == [
        ("1", "yes"), ("1", "yes"), ("0", "no"),
    ]  # fmt: skip
    document = json.loads((folder / "campaign.json").read_text())
    assert document["slo"]["conditions"] == [SLO]
    assert "search" not in document


def test_flags_a_search_cannot_use_are_refused_in_one_line() -> None:
    cases = {
        ("--search", "rate"): "add --slo",
        ("--search", "rate", "--slo", SLO, "--request-rate", "5"): "drop --request-rate",
        ("--search", "concurrency", "--slo", SLO, "--num-runs", "2"): "drop --num-runs",
        ("--slo", "p99_tft_ms<=5"): "p99_tft_ms is not one of summary.csv's metrics",
        ("--slo", "p99_ttft_ms"): "is not a condition",
    }
    for args, words in cases.items():
        proc = refusal("--mock", *args, "--num-prompts", "4")
        assert proc.returncode == 2, (args, proc.stdout, proc.stderr)
        assert words in proc.stderr, (args, proc.stderr)
