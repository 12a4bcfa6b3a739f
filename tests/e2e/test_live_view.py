"""The live view off a terminal: plain lines on stderr at t0, every few seconds and at the end,
with the run's figures; none with --disable-tqdm. The real CLI, workers and embedded mock."""

from __future__ import annotations

import re

from helpers import loadgen, startup_s

from loadgen.session.live_view import PLAIN_EVERY_S

SMALL = ["--random-input-len", "16", "--random-output-len", "8", "--workers", "1"]
LINE = re.compile(
    r"^\[\s*(\d+\.\d) s\]\s+\d+%\| ([\d,]+)/([\d,]+) finished: ([\d,]+) completed, "
    r"([\d,]+) failed, ([\d,]+) in flight \| (?:now|run \([\d,.]+ s\)) [\d,.]+ req/s, "
    r"[\d,.]+ output tok/s \| (?:last 10 s|run) p50/p99: TTFT .+, ITL .+ \| errors: .+ \| .+$",
    re.MULTILINE,
)


def number(text: str) -> int:
    return int(text.replace(",", ""))


def test_a_run_off_a_terminal_prints_plain_lines_every_few_seconds() -> None:
    # 42 requests at 6 a second, nearly evenly spaced: 7 s, so a line at t0 and one 5 s later.
    proc = loadgen(
        "--mock", "--num-prompts", "42", "--request-rate", "6", "--burstiness", "100", *SMALL
    )
    assert proc.returncode == 0, proc.stderr
    lines = list(LINE.finditer(proc.stderr))
    assert len(lines) >= 2, proc.stderr
    first, second = lines[0].groups(), lines[1].groups()
    # At t0 (within a start-up of the CLI on this machine), nothing finished yet.
    assert float(first[0]) < startup_s() and number(first[1]) == 0
    assert float(second[0]) >= PLAIN_EVERY_S - 0.5
    finished, total, completed, failed, _ = (number(x) for x in second[1:])
    assert total == 42 and 0 < finished < 42 and completed + failed == finished
    assert "TTFT -" not in lines[1].group(0)  # requests finished in the last 10 s: figures
    last = lines[-1].groups()  # drawn as the run ends: a log shows how it ended
    assert number(last[1]) == 42 and number(last[3]) + number(last[4]) == 42, proc.stderr
    # The last line is of the whole run: the summary's figures, as the summary prints them.
    rate = re.search(r"Request throughput \(req/s\):\s+([\d.]+)", proc.stdout)
    completed = re.search(r"Successful requests:\s+(\d+)", proc.stdout)
    assert rate is not None and completed is not None, proc.stdout
    assert "run (" in lines[-1].group(0) and f") {rate[1]} req/s" in lines[-1].group(0)
    assert number(last[3]) == int(completed[1])
    assert not LINE.search(proc.stdout)  # stdout keeps upstream's lines and the report


def test_long_answers_show_their_output_rate_before_one_ends() -> None:
    # 4 answers of 300 tokens 25 ms apart: 7.5 s each, so the line 5 s in has none finished.
    proc = loadgen(
        "--mock", "--mock-itl-ms", "25", "--num-prompts", "4", "--random-input-len", "16",
        "--random-output-len", "300", "--workers", "1",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    early = [m for m in LINE.finditer(proc.stderr) if number(m.group(2)) == 0]
    shown = [re.search(r"now [\d,.]+ req/s, ([\d,.]+) output tok/s", m.group(0)) for m in early]
    # 4 streams at 40 tokens/s each: about 160 output tok/s, not 0, before any answer ended.
    rates = [float(m.group(1).replace(",", "")) for m in shown if m is not None]
    assert any(rate > 80 for rate in rates), proc.stderr


def test_disable_tqdm_prints_no_line() -> None:
    proc = loadgen("--mock", "--num-prompts", "8", "--disable-tqdm", *SMALL)
    assert proc.returncode == 0, proc.stderr
    assert "%|" not in proc.stderr and "%|" not in proc.stdout
    assert "Serving Benchmark Result" in proc.stdout
