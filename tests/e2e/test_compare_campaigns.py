"""Campaigns compared point by point and printed again (issue 29, point 8), and -q on every
command that prints a summary: two small campaigns of the real CLI against the embedded mock
(one slower than the other, each with an SLO), then the real `compare`, `report` and
`calibrate` commands, in this process."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from helpers import InProcess, cli, run_in_process

from loadgen.report.summary import SUMMARY_TITLE
from loadgen.report.verdict import VERDICT_HEADS

SLO = "p99_ttft_ms<=45"
LOAD = ["--num-prompts", "16", "--random-input-len", "16", "--random-output-len", "8",
        "--mock-itl-ms", "2", "--num-runs", "2", "--workers", "1", "--disable-tqdm",
        "--slo", SLO]  # fmt: skip
TABLE_RULE = "=" * 40  # the campaign table's rules start so


def campaign(folder: Path, ttft_ms: int, caps: str, *quiet: str) -> tuple[Path, InProcess]:
    """A campaign of ``caps`` against a mock answering after ``ttft_ms``, renamed ``folder``;
    its folder and the run's output."""
    results = folder.parent / f"{folder.name}-results"
    proc = run_in_process("--mock", "--mock-ttft-ms", str(ttft_ms), "--max-concurrency", caps,
                          *LOAD, "--result-dir", str(results), *quiet)  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    (made,) = results.iterdir()
    made.rename(folder)
    return folder, proc


@pytest.fixture(scope="module")
def campaigns(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, InProcess]]:
    """build-a: concurrency 1 and 2 at 20 ms TTFT (within the SLO); build-b: 2 and 4 at 60 ms
    (past it), run with -q. They share concurrency 2."""
    folder = tmp_path_factory.mktemp("campaigns")
    return {
        "a": campaign(folder / "build-a", 20, "1,2"),
        "b": campaign(folder / "build-b", 60, "2,4", "-q"),
    }


def table_of(stdout: str) -> list[str]:
    """A campaign's table in its output, from its first rule through the SLO's line."""
    lines = stdout.splitlines()
    start = lines.index(next(line for line in lines if line.startswith(TABLE_RULE)))
    end = next(k for k, line in enumerate(lines) if "within the SLO" in line or
               line.startswith("No point meets"))  # fmt: skip
    return lines[start : end + 1]


def test_two_campaigns_compare_point_by_point(
    tmp_path: Path, campaigns: dict[str, tuple[Path, InProcess]]
) -> None:
    (a, _), (b, _) = campaigns["a"], campaigns["b"]
    out = tmp_path / "cmp.json"
    proc = cli("compare", str(a), str(b), "--resamples", "200", "--json", str(out))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith(
        "build-b against build-a: 1 point(s) matched by concurrency (difference = build-b − "
        "build-a, 95 % bootstrap interval over each point's pooled requests;"
    )
    assert lines[1:4] == [
        "  only in build-a (not compared): c=1",
        "  only in build-b (not compared): c=4",
        "c=2 (2 and 2 run(s))",
    ]
    row = next(line for line in lines if line.strip().startswith("median ttft (ms)"))
    assert row.endswith(" *")  # 40 ms slower: far past the noise
    assert next(line for line in lines if line.strip().startswith("not sent")).split()[2:4] == [
        "0", "0"
    ]  # fmt: skip
    assert lines[-1] == (
        f"  SLO: build-a met (2/2 runs) of {SLO}; build-b missed (0/2 runs) of {SLO}"
    )
    # The traffic differed only in the mock's delay: said once, on stderr.
    assert proc.stderr.splitlines() == [
        f"warning: {b} was run with other settings than {a}: --mock-ttft-ms 20.0 vs 60.0"
    ]
    (compared,) = json.loads(out.read_text())["comparisons"]
    assert (compared["only_base"], compared["only_other"]) == (["c=1"], ["c=4"])
    (point,) = compared["points"]
    assert point["slo"] == {"base": "met (2/2 runs)", "other": "missed (0/2 runs)"}
    # The point's figures are its runs pooled, as `compare` pools the point's folder: the same
    # values and, drawn with the same seed, the same intervals.
    name = "max_concurrency=2-request_rate=inf"
    pooled = cli("compare", str(a / name), str(b / name), "--resamples", "200", "--json",
                 str(tmp_path / "pooled.json"))  # fmt: skip
    assert pooled.returncode == 0, pooled.stderr
    # Each repeat drew its prompts from a seed of its own: run k pairs with run k, no warning.
    assert pooled.stderr.splitlines() == [
        f"warning: {b / name} was run with other settings than {a / name}: "
        "--mock-ttft-ms 20.0 vs 60.0"
    ]
    (runs,) = json.loads((tmp_path / "pooled.json").read_text())["comparisons"]
    assert point["metrics"] == runs["metrics"]
    ttft = {m["metric"]: m for m in point["metrics"]}["median ttft (ms)"]
    assert ttft["base"] >= 20 and ttft["other"] >= 60 and ttft["flagged"]


def test_quiet_compare_prints_the_table_alone(
    campaigns: dict[str, tuple[Path, InProcess]],
) -> None:
    (a, _), (b, _) = campaigns["a"], campaigns["b"]
    loud = cli("compare", str(a), str(b), "--resamples", "20")
    quiet = cli("compare", str(a), str(b), "--resamples", "20", "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    assert quiet.stdout == loud.stdout and loud.stderr != ""


def test_a_campaign_against_a_run_is_one_line_and_exit_2(
    campaigns: dict[str, tuple[Path, InProcess]],
) -> None:
    a, _ = campaigns["a"]
    point = a / "max_concurrency=1-request_rate=inf"
    proc = cli("compare", str(a), str(point))
    assert proc.returncode == 2
    assert proc.stderr.splitlines() == [
        f"error: compare campaigns with campaigns: {a} is a campaign's folder, {point} is not "
        "(a point's folder, CAMPAIGN/POINT, compares as a run)"
    ]


def test_report_prints_the_campaigns_table_as_it_was_printed(
    campaigns: dict[str, tuple[Path, InProcess]],
) -> None:
    a, live = campaigns["a"]
    proc = cli("report", str(a))
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert (
        lines[0] == f"Campaign {a}: 2 point(s), 4 run(s) with records; the table rebuilt from them"
    )
    table = table_of(live.stdout)
    assert lines[1:] == table
    assert table[-1].startswith(f"Highest throughput within the SLO ({SLO}): max_concurrency=2")
    quiet = cli("report", str(a), "-q")
    assert quiet.returncode == 0 and quiet.stdout.splitlines() == table and quiet.stderr == ""


def test_a_quiet_campaign_prints_its_table_and_verdict_alone(
    campaigns: dict[str, tuple[Path, InProcess]],
) -> None:
    b, live = campaigns["b"]
    assert live.stdout.splitlines()[0].startswith(TABLE_RULE), live.stdout
    assert live.stdout.splitlines() == table_of(live.stdout)
    assert live.stdout.splitlines()[-1] == f"No point meets the SLO ({SLO})"
    assert live.stderr == ""
    assert cli("report", str(b), "-q").stdout == live.stdout


def test_report_of_a_folder_refuses_an_export_and_a_reporting_flag(
    campaigns: dict[str, tuple[Path, InProcess]],
) -> None:
    a, _ = campaigns["a"]
    csv = cli("report", str(a), "--format", "csv")
    assert csv.returncode == 2 and f"{a} is a folder: --format csv exports one run's" in csv.stderr
    flag = cli("report", str(a), "--goodput", "ttft:100")
    assert flag.returncode == 2 and "drop --goodput" in flag.stderr


def test_quiet_report_of_a_run_prints_its_table_and_verdict(
    tmp_path: Path, campaigns: dict[str, tuple[Path, InProcess]]
) -> None:
    a, _ = campaigns["a"]
    point = a / "max_concurrency=1-request_rate=inf"
    for path in point.iterdir():
        shutil.copy(path, tmp_path / path.name)
    records = str(next(tmp_path.glob("*run=0.records.arrow")))
    written = ["--save-result", "--result-dir", str(tmp_path / "out")]
    loud = cli("report", records, *written)
    quiet = cli("report", records, *written, "-q")
    assert quiet.returncode == 0 and quiet.stderr == ""
    lines = quiet.stdout.splitlines()
    assert lines[0] == SUMMARY_TITLE and lines[-1].startswith(VERDICT_HEADS)
    assert quiet.stdout in loud.stdout and "Results written to " in loud.stdout


def test_quiet_calibrate_prints_its_table_and_conclusion(tmp_path: Path) -> None:
    args = ["calibrate", "--concurrency", "2", "--floor-seconds", "0.5", "--rounds", "1",
            "--output-len", "4", "--itl-ms", "2"]  # fmt: skip
    proc = cli(*args, "-q")
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.splitlines()
    assert lines[0].startswith("concurrency requests failed")  # the header's two lines
    assert lines[2].split()[:3] == ["2", "2", "0"]  # the step's row: 2 requests, 0 failed
    assert lines[3].startswith("Conclusion: ") and len(lines) == 4
