"""report.html (issue 16 point 4, issue 29 point 7): a tiny campaign writes its own, `loadgen
report --format html` draws a run's and a campaign folder's, each one self-contained (inline SVG,
no script, nothing fetched), and all of it works where plotly cannot be imported (the real CLI,
real workers and the embedded mock)."""

from __future__ import annotations

import html
import json
import os
import re
import subprocess
import sys
from pathlib import Path

from helpers import InProcess, cli, hang_guard, loadgen, only_json_path, run_in_process
from svg_charts import charts

TINY = ["--num-prompts", "12", "--random-input-len", "16", "--random-output-len", "8",
        "--mock-ttft-ms", "5", "--mock-itl-ms", "2", "--workers", "1",
        "--disable-tqdm"]  # fmt: skip
RUN_TITLES = (
    "TTFT distribution (CDF)",
    "ITL distribution (CDF)",
    "E2EL distribution (CDF)",
    "Throughput and requests in flight over time",
    "Completed requests per second",
    "Requests in flight",
)
CAMPAIGN_TITLES = (*RUN_TITLES, "Output throughput vs p99 TTFT", "Output throughput vs p99 ITL")
SECRET = "sk-e2e-do-not-show"
# A Python where `import plotly` fails as it does where the [plot] extra is not installed.
NO_PLOTLY = 'import sys\nsys.modules["plotly"] = None\n'
SVG_NAMESPACES = {"http://www.w3.org/2000/svg", "http://www.w3.org/1999/xlink"}
# An attribute or a style that would load an address (absolute or protocol-relative).
FETCHED = re.compile(r"""(?:(?:src|href)\s*=|url\()\s*["']?(?:https?:)?//""", re.I)


def report(*args: str) -> InProcess:
    """``loadgen report ARGS``, in this process (it reads files and starts nothing)."""
    return cli("report", *args)


def report_without_plotly(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """``loadgen report ARGS`` in its own process, whose Python cannot import plotly (``env``)."""
    return subprocess.run(
        [sys.executable, "-m", "loadgen", "report", *args],
        capture_output=True, text=True, timeout=hang_guard(60), env=env,
    )  # fmt: skip


def without_plotly(tmp_path: Path) -> dict[str, str]:
    """An environment whose Python cannot import plotly (a sitecustomize on PYTHONPATH)."""
    shim = tmp_path / "no-plotly"
    shim.mkdir()
    (shim / "sitecustomize.py").write_text(NO_PLOTLY)
    return {**os.environ, "PYTHONPATH": str(shim)}


def assert_self_contained(page: str, least_charts: int) -> None:
    """At least ``least_charts`` inline SVG charts; no script, no link, nothing loaded from
    anywhere: the only addresses are the SVG namespaces and the server's loopback one."""
    assert len(charts(page)) >= least_charts
    assert not re.search(r"<script\b", page, re.IGNORECASE)
    assert not re.search(r"<link\b", page, re.IGNORECASE)
    addresses = set(re.findall(r"https?://[^\s\"'<>]+", page)) - SVG_NAMESPACES
    assert all(a.startswith("http://127.0.0.1:") for a in addresses), addresses
    assert not FETCHED.search(page)


def test_a_campaign_writes_its_report_and_report_redraws_it(tmp_path: Path) -> None:
    proc = loadgen("--mock", "--max-concurrency", "2,4", "--num-runs", "2", *TINY,
                   "--result-dir", str(tmp_path), timeout=120)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (folder,) = tmp_path.iterdir()
    page_path = folder / "report.html"
    assert f"Report written to {page_path}" in proc.stdout.splitlines()
    page = page_path.read_text()
    assert_self_contained(page, least_charts=5 + 2 * 7)  # CDFs, planes, each point over time
    for title in CAMPAIGN_TITLES:
        assert title in page, title
    for label in ("c=2", "c=4", "max_concurrency=2-request_rate=inf", "Pareto front"):
        assert label in page, label
    assert re.search(r"\d of 4 runs: client OK", page)
    assert "no interval: 2 run(s) at this point; intervals need &gt;= 3 (--num-runs)" in page
    redrawn = report(str(folder), "--format", "html", "--output", str(tmp_path / "again.html"))
    assert redrawn.returncode == 0, redrawn.stderr
    assert redrawn.stdout == f"Report written to {tmp_path / 'again.html'}\n"
    again = (tmp_path / "again.html").read_text()
    strip = re.compile(r"chart-[0-9a-f-]{36}|generated \S+")  # each chart's id, the date
    assert strip.sub("", again) == strip.sub("", page)
    printed = report(str(folder))  # without --format html: the campaign's table, printed
    assert printed.returncode == 0 and "max_concurrency=4-request_rate=inf " in printed.stdout


def test_a_run_s_report_html_beside_its_records_without_its_secrets(tmp_path: Path) -> None:
    # The CLI in its own process: the page shows its command line (sys.argv).
    proc = loadgen("--mock", *TINY, "--max-concurrency", "3", "--save-result", "--result-dir",
                   str(tmp_path), "--header", f"Authorization=Bearer {SECRET}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (records,) = tmp_path.glob("*.records.arrow")
    drawn = report(str(records), "--format", "html")
    assert drawn.returncode == 0, drawn.stderr
    page_path = records.with_name(records.name.replace(".records.arrow", ".report.html"))
    assert drawn.stdout.splitlines()[-1] == f"Report written to {page_path}"
    assert "Serving Benchmark Result" in drawn.stdout  # the summary, as --format summary
    assert len(list(tmp_path.glob("*.json"))) == 1  # no result JSON written by the report
    page = page_path.read_text()
    assert_self_contained(page, least_charts=3 + 6)
    for title in RUN_TITLES:
        assert title in page, title
    # over time: each latency's percentiles per bin, then the mock's own series (its /metrics)
    titles = [chart.title for chart in charts(page)]
    bands = [titles.index(f"{key} over time: p50, p90 and p99 of each bin")
             for key in ("TTFT", "ITL", "E2EL")]  # fmt: skip
    server = titles.index("Server: requests running and waiting")
    assert titles.index("Completed requests per second") < bands[0] < bands[-1] < server
    verdict = json.loads(only_json_path(tmp_path).read_text())["loadgen"]["verdict"]
    text = html.unescape(page)
    for shown in ("Mean TTFT (ms)", "P99 ITL (ms)", verdict, "--max-concurrency 3",
                  "dataset_name=random", "the embedded mock", "Authorization=***"):  # fmt: skip
        assert shown in text, shown
    assert SECRET not in page


def test_without_plotly_a_campaign_and_report_still_draw_report_html(tmp_path: Path) -> None:
    """report.html needs nothing beyond the core install: plotly (the [plot] extra) is only for
    --plot-timeline."""
    env = without_plotly(tmp_path)
    proc = loadgen("--mock", "--max-concurrency", "2", "--num-runs", "2", *TINY,
                   "--result-dir", str(tmp_path / "out"), timeout=120, env=env)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "skipped" not in proc.stdout + proc.stderr
    (folder,) = (tmp_path / "out").iterdir()
    assert f"Report written to {folder / 'report.html'}" in proc.stdout.splitlines()
    assert_self_contained((folder / "report.html").read_text(), least_charts=5)
    (records, *_) = sorted(folder.glob("*/*.records.arrow"))
    drawn = report_without_plotly(str(records), "--format", "html", "--output",
                                  str(tmp_path / "run.html"), env=env)  # fmt: skip
    assert drawn.returncode == 0, drawn.stderr
    page = (tmp_path / "run.html").read_text()
    assert_self_contained(page, least_charts=3 + 6)
    titles = {chart.title for chart in charts(page)}
    assert {"TTFT over time: p50, p90 and p99 of each bin", *RUN_TITLES[:3]} <= titles


def test_a_pooling_run_s_page_has_no_token_figures(tmp_path: Path) -> None:
    """A pooling answer has one instant: its TTFT is its E2EL, it has no ITL and no tokens."""
    proc = run_in_process("--mock", "--workers", "1", "--backend", "openai-embeddings",
                          "--endpoint", "/v1/embeddings", "--num-prompts", "12",
                          "--random-input-len", "16", "--disable-tqdm", "--save-result",
                          "--result-dir", str(tmp_path))  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    (records,) = tmp_path.glob("*.records.arrow")
    drawn = report(str(records), "--format", "html")
    assert drawn.returncode == 0, drawn.stderr
    page = records.with_name(records.name.replace(".records.arrow", ".report.html")).read_text()
    assert_self_contained(page, least_charts=1 + 3)
    for shown in ("E2EL distribution (CDF)", "Completed requests per second", "Requests in flight"):
        assert shown in page, shown
    for absent in ("TTFT distribution (CDF)", "ITL distribution (CDF)", "Output tokens per second"):
        assert absent not in page, absent
