"""`loadgen calibrate`: loadgen's own timing error, measured against the mock server's records.

It starts the recording mock server (``--record-timings``) and, for rising concurrencies, runs the
real client against it and compares the two per request (loadgen/timing_error.py: the join, the
statistics, the verdict and the table). A step's client run is the caller's (``RunStep``): the CLI
hands in one that runs the benchmark in this process as `loadgen run` does (loadgen/cli/
calibrate.py, through the Python API and its run session), so this module imports neither the
session nor the API (a contract in setup.cfg).
"""

from __future__ import annotations

import logging
import math
import shutil
import signal
import tempfile
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from loadgen.console import TABLE
from loadgen.mock.process import EmbeddedMockServer, MockServerError
from loadgen.mock.recorder import TimingRecords
from loadgen.text.tokenizer import MOCK_MODEL_NAME
from loadgen.timing_error import (
    HEADER,
    LEGEND,
    ClientRun,
    StepVerdict,
    bound_of,
    compare,
    conclusion,
    format_row,
    judge,
    notes,
)
from loadgen.wake_floor import FloorError, WakeFloor, measure_floor

log = logging.getLogger(__name__)

SERVER_START_TIMEOUT_S = 60.0
SERVER_STOP_TIMEOUT_S = 15.0


# --- the processes ---


class CalibrationError(Exception):
    """The mock server or a step's run failed, or a step was stopped (the CLI prints it and
    exits with ``exit_code``: 1, or 128 + the stop signal's number)."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


class RecordingServer:
    """``loadgen mock-server --record-timings`` in its own process on a free loopback port."""

    def __init__(self, work_dir: Path, ttft_ms: float, itl_ms: float) -> None:
        self.timings_path = work_dir / "server-timings.npz"
        self.server = EmbeddedMockServer(
            ttft_ms,
            itl_ms,
            extra_args=("--record-timings", str(self.timings_path)),
            stderr_path=work_dir / "server-stderr.txt",
            # Out of the terminal's process group: a Ctrl-C stops the step, and the server
            # still answers for the part of it that was measured.
            own_session=True,
        )

    def start(self) -> str:
        """Launch the server; return its base URL once it listens."""
        try:
            return self.server.start(SERVER_START_TIMEOUT_S)
        except MockServerError as exc:
            raise CalibrationError(str(exc)) from None

    def check_alive(self) -> None:
        """Raise if the server process has ended."""
        process = self.server.process
        if process is not None and process.poll() is not None:
            raise CalibrationError(
                f"the mock server exited ({process.returncode}): {self.server.last_error()}"
            )

    def records(self) -> TimingRecords:
        """The server's records so far, from ``GET /timings``."""
        try:
            with urllib.request.urlopen(self.server.url + "/timings", timeout=60) as response:
                return TimingRecords.from_bytes(response.read())
        except OSError as exc:
            raise CalibrationError(f"cannot fetch the mock server's /timings: {exc}") from None

    def stop(self) -> None:
        """SIGTERM the server and require a clean exit with its records file written."""
        code = self.server.stop(SERVER_STOP_TIMEOUT_S)
        if code is None:
            return
        if code != 0 or not self.timings_path.exists():
            raise CalibrationError(
                f"the mock server did not save its records: {self.server.last_error()}"
            )

    def kill(self) -> None:
        """End the server process at once, if it runs."""
        self.server.kill()


@dataclass(frozen=True)
class ClientStep:
    """One step's client run: what `loadgen run` is asked for, and how long it may take."""

    index: int  # the step's place in the run, from 0
    concurrency: int
    num_prompts: int
    request_rate: float  # Poisson arrivals, req/s
    workers: int
    input_len: int
    output_len: int
    time_limit_s: float  # past it the run is stopped, its measured part kept
    result_dir: Path | None = None  # where its detailed result is saved (--work-dir), if kept

    @property
    def prefix(self) -> str:
        """The request-id prefix that joins its requests to the server's records."""
        return f"calib-{self.index}-"

    def options(self, url: str) -> dict[str, Any]:
        """The run's flags as the Python API's keywords (``loadgen.run(**options)``)."""
        options: dict[str, Any] = {
            "base_url": url,
            "model": MOCK_MODEL_NAME,
            "workers": self.workers,
            "max_concurrency": self.concurrency,
            "request_rate": self.request_rate,
            "num_prompts": self.num_prompts,
            "random_input_len": self.input_len,
            "random_output_len": self.output_len,
            "request_id_prefix": self.prefix,
            "disable_tqdm": True,  # the table is calibrate's output
        }
        if self.result_dir is not None:
            options.update(
                save_result=True,
                save_detailed=True,
                result_dir=str(self.result_dir),
                result_filename="step.json",
            )
        return options


@dataclass
class StepRun:
    """What a step's client run measured, and, when it was stopped before its end, why (a
    line naming the step) and the exit code calibrate then ends with."""

    client: ClientRun
    stopped: str | None = None
    exit_code: int = 0


# Runs a step's client against the server at the URL; CalibrationError when it measured nothing.
RunStep = Callable[[str, ClientStep], StepRun]


def parse_concurrencies(value: str) -> list[int]:
    """``--concurrency``: a comma list of steps, sorted, without repeats (ValueError if bad)."""
    try:
        steps = sorted({int(part) for part in value.split(",") if part.strip()})
    except ValueError:
        raise ValueError("a comma list of integers, e.g. 64,256,1024") from None
    if not steps or steps[0] < 1:
        raise ValueError("concurrencies must be at least 1")
    return steps


def step_load(
    concurrency: int, rounds: float, ttft_ms: float, itl_ms: float, output_len: int
) -> tuple[int, float, float]:
    """A step's requests, Poisson request rate (req/s) and a client time limit (s)."""
    stream_s = (ttft_ms + output_len * itl_ms) / 1000
    num_prompts = max(1, round(rounds * concurrency))
    # Poisson arrivals at concurrency / stream length hold about `concurrency` streams open in
    # the steady state. A burst at t0 would only measure the server's queue, and evenly spaced
    # arrivals would line every stream's events up on one ITL grid, so each tick would be a
    # burst of writes. The concurrency cap keeps it from overshooting.
    request_rate = concurrency / stream_s if stream_s > 0 else math.inf
    time_limit_s = 120 + 10 * stream_s * math.ceil(num_prompts / concurrency)
    return num_prompts, request_rate, time_limit_s


def calibrate(
    concurrencies: list[int],
    workers: int,
    itl_ms: float,
    ttft_ms: float,
    input_len: int,
    output_len: int,
    rounds: float,
    threshold_ms: float | None,
    floor_seconds: float,
    work_dir: Path | None,
    run_step: RunStep,
) -> None:
    """Run the steps (each client run by ``run_step``) and print a row per step, the legend,
    then the conclusion. A step stopped early (its time limit, a stop signal) gets its row, of
    the requests that finished, and ends calibrate with a CalibrationError that says why."""
    temporary = work_dir is None
    folder = Path(tempfile.mkdtemp(prefix="loadgen-calibrate-")) if work_dir is None else work_dir
    folder.mkdir(parents=True, exist_ok=True)
    server = RecordingServer(folder, ttft_ms, itl_ms)
    where = "while the mock server started"
    try:
        url = server.start()
        where = f"at the step of concurrency {concurrencies[0]}"  # its floor is measured first
        _say(
            f"mock server {url}: TTFT {ttft_ms:g} ms, ITL {itl_ms:g} ms; client: {workers} "
            f"workers, {input_len} input / {output_len} output tokens per request"
        )
        _say("errors are client − server on the same clock; events/s as the server wrote")
        _say(HEADER, TABLE)
        verdicts: list[StepVerdict] = []
        for index, concurrency in enumerate(concurrencies):
            where = f"at the step of concurrency {concurrency}"
            num_prompts, request_rate, time_limit_s = step_load(
                concurrency, rounds, ttft_ms, itl_ms, output_len
            )
            step = ClientStep(
                *(index, concurrency, num_prompts, request_rate, workers, input_len, output_len),
                time_limit_s,
                None if temporary else folder / f"step-{index}",
            )
            # Measured while the mock and the client are idle, as close to the step as can be.
            try:
                floor = measure_floor(floor_seconds)
            except FloorError as exc:
                raise CalibrationError(str(exc)) from None
            run = run_step(url, step)
            verdicts.append(_show_step(server, step, run, floor, threshold_ms))
        where = "after the last step"
        server.stop()
        _say(LEGEND)
        _say(conclusion(verdicts), TABLE)
    except KeyboardInterrupt as exc:  # Ctrl-C, or a stop signal the CLI raises as one
        signum = getattr(exc, "signum", signal.SIGINT)
        raise CalibrationError(
            f"interrupted by {signal.Signals(signum).name} {where}; the rows above are what "
            "was measured",
            128 + signum,
        ) from None
    finally:
        server.kill()
        if temporary:
            shutil.rmtree(folder, ignore_errors=True)


def _show_step(
    server: RecordingServer,
    step: ClientStep,
    run: StepRun,
    floor: WakeFloor,
    threshold_ms: float | None,
) -> StepVerdict:
    """Compare a step's run with the server's records and print its row and notes; a stopped
    step's row too, then its CalibrationError."""
    try:
        server.check_alive()
        comparison = compare(run.client, server.records(), step.prefix)
    except CalibrationError as exc:
        if run.stopped is None:
            raise
        why = f"{run.stopped}; it cannot be compared: {exc}"
        raise CalibrationError(why, run.exit_code) from None
    verdict = judge(step.concurrency, comparison, bound_of(floor, threshold_ms))
    _say(format_row(step.concurrency, comparison, floor, verdict, run.stopped is not None), TABLE)
    for line in notes(step.concurrency, comparison):
        _say(line)
    if run.stopped is not None:
        raise CalibrationError(
            f"{run.stopped}; its row covers the requests that finished", run.exit_code
        )
    return verdict


def _say(line: str, extra: Mapping[str, object] | None = None) -> None:
    log.info(line, extra=extra)  # TABLE: a line of the table -q keeps
