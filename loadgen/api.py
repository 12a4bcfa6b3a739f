"""The Python API: ``loadgen.run(base_url=..., model=..., ...)`` runs a benchmark as `loadgen run`
would and returns its ``Result``; ``MockServer`` starts the embedded mock server.

The keyword arguments are the flags of `loadgen run`, underscored (``max_concurrency=64`` is
``--max-concurrency 64``), and they go through the CLI's own parser, so a value is read, checked
and refused exactly as on the command line: a bad one raises ValueError with the line the CLI
prints. Workers never import the caller's main module (loadgen/fleet/worker_spawn.py), so a script
without a ``__main__`` guard and ``python -`` work; under a running event loop (a notebook) the
run goes in a thread of its own, and an interrupt there stops it as Ctrl-C stops the CLI.

It prints nothing unless asked: the notes and warnings the CLI prints come back in
``Result.notes`` (loadgen/console.py), the summary in ``Result.summary``, and the progress bar
is off; ``verbose=True`` shows all of them as the CLI does, and the caller's own logging
configuration gets what its levels let through (the ``loadgen`` logger).
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from loadgen.cli.keywords import build_config
from loadgen.config import ConfigError, InputError, RunConfig
from loadgen.console import Note, collect_notes
from loadgen.fleet.fanout import FanoutError
from loadgen.mock.process import EmbeddedMockServer, MockServerError
from loadgen.records.model import RunRecords
from loadgen.records.read import read_records
from loadgen.records.redact import redact_text
from loadgen.report.run_summary import RunSummary
from loadgen.server.errors import ServerError
from loadgen.session.lifecycle import RunFailed, StopSwitch
from loadgen.session.runner import RunOutcome, run_outcome
from loadgen.text.chat_template import ChatTemplateError
from loadgen.text.tokenizer import MOCK_MODEL_NAME, TokenizerLoadError

__all__ = ["BenchmarkError", "MockServer", "Note", "Result", "read_records", "run"]

# The run could not start or finish; the CLI prints these as "error: ..." and exits non-zero.
RUN_ERRORS = (TokenizerLoadError, ChatTemplateError, ServerError, FanoutError, MockServerError)


REPR_METRICS = ("completed", "failed", "request_throughput", "median_ttft_ms", "median_itl_ms")


class BenchmarkError(RuntimeError):
    """The run failed (no usable measurement, lost workers, an interruption); the message is
    the line the CLI prints after ``error:``, ``exit_code`` the code it exits with, ``notes``
    the notes and warnings the run gave before it failed."""

    def __init__(self, message: str, exit_code: int = 1, notes: Iterable[Note] = ()) -> None:
        super().__init__(message)
        self.exit_code = exit_code
        self.notes = list(notes)


@dataclass(frozen=True)
class Result:
    """A finished run: the result JSON's values (``result.metrics["mean_ttft_ms"]``, also
    ``result["mean_ttft_ms"]`` and ``result.mean_ttft_ms``), the client verdict, the records
    and the console summary, and the notes and warnings the CLI would have printed."""

    metrics: dict[str, Any] = field(repr=False)  # the result JSON, as --save-result writes it
    verdict: str  # the summary's last line: whether the client's own timing can be trusted
    records: RunRecords = field(repr=False)  # a row per request (numpy), token instants, errors
    records_file: str | None  # the records file, when one was saved (read_records reads it)
    result_file: str | None  # the result JSON file, when --save-result/--append-result asked
    exit_code: int  # the CLI's: 0, or 3 when a --fail-on gate was breached
    summary: list[str] = field(repr=False)  # the lines the CLI prints
    # the run's figures, typed (loadgen/report/run_summary.py): what metrics and summary render
    run_summary: RunSummary | None = field(default=None, repr=False)
    # the notes and warnings, in order: (level, line as the CLI prints it), e.g. ("warning",
    # "warning: ...")
    notes: list[Note] = field(default_factory=list, repr=False)

    def __repr__(self) -> str:
        shown = ", ".join(f"{key}={self.metrics.get(key)!r}" for key in REPR_METRICS)
        return (
            f"Result({shown}, exit_code={self.exit_code}, verdict={self.verdict!r}, "
            f"result_file={self.result_file!r}, records_file={self.records_file!r})"
        )

    def __getitem__(self, key: str) -> Any:
        return self.metrics[key]

    def __getattr__(self, name: str) -> Any:
        metrics = self.__dict__.get("metrics")
        if metrics is not None and name in metrics:
            return metrics[name]
        raise AttributeError(f"Result has no attribute or metric '{name}'")

    def __dir__(self) -> Iterable[str]:
        return [*super().__dir__(), *self.__dict__.get("metrics", {})]


class MockServer:
    """The embedded mock server (`loadgen mock-server`) in its own process on a free loopback
    port: ``with loadgen.MockServer(ttft_ms=100, itl_ms=20) as mock: loadgen.run(
    base_url=mock.url, model=mock.model, ...)``."""

    model = MOCK_MODEL_NAME  # the model it serves; its tokenizer is built in

    def __init__(self, ttft_ms: float = 0.0, itl_ms: float = 0.0) -> None:
        self._server = EmbeddedMockServer(ttft_ms, itl_ms)
        self.url = ""

    def start(self) -> str:
        """Start it and return its base URL (MockServerError if it does not come up)."""
        self.url = self._server.start()
        return self.url

    def stop(self) -> None:
        """Stop it (and wait for it to exit)."""
        self._server.stop()

    def __enter__(self) -> MockServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def run(*, verbose: bool = False, **options: Any) -> Result:
    """Run a benchmark: keyword arguments are `loadgen run`'s flags, underscored; ``verbose``
    prints what the CLI prints (else nothing: the notes are in ``Result.notes``).

    Raises ValueError for a bad argument (the CLI's line), BenchmarkError when the run fails.
    """
    if not verbose and options.get("disable_tqdm") is None:  # no progress bar unless asked
        options["disable_tqdm"] = True
    config = build_config(options)
    with collect_notes(verbose) as notes:
        try:
            outcome = _run_here_or_in_a_thread(config)
        except (ConfigError, InputError) as exc:  # a flag's value, or an input a flag names
            raise ValueError(redact_text(str(exc))) from None
        except RUN_ERRORS as exc:  # a FanoutError's stop signal keeps its exit code: 130/143
            code = getattr(exc, "exit_code", 1)
            raise BenchmarkError(redact_text(str(exc)), code, notes) from None
        except RunFailed as exc:
            raise BenchmarkError(redact_text(str(exc)), exc.exit_code, notes) from None
    return _result(outcome, notes)


def _run_here_or_in_a_thread(config: RunConfig) -> RunOutcome:
    """The run in this thread, or, where it cannot own an event loop and the stop signals (a
    notebook's cell runs under a loop), in a thread of its own that an interrupt stops."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        if threading.current_thread() is threading.main_thread():
            return run_outcome(config, result_in_memory=True)
    stop = StopSwitch()
    done: dict[str, Any] = {}

    def target() -> None:
        try:
            done["outcome"] = run_outcome(config, result_in_memory=True, stop=stop)
        except BaseException as exc:  # handed to the caller's thread as is
            done["error"] = exc

    thread = threading.Thread(target=target, name="loadgen-run", daemon=True)
    thread.start()
    while thread.is_alive():
        try:
            thread.join()
        except KeyboardInterrupt:  # the run stops as Ctrl-C stops the CLI; its error follows
            stop.request_stop(signal.SIGINT)
    if "error" in done:
        raise done["error"]
    return done["outcome"]


def _result(outcome: RunOutcome, notes: list[Note]) -> Result:
    """The Result of a finished run; its metrics read back as the result file holds them."""
    report = outcome.report
    assert report.result is not None  # run_outcome(result_in_memory=True) always builds it
    metrics = json.loads(json.dumps(report.result))  # plain values, inf as the file has it
    return Result(
        metrics=metrics,
        verdict=report.summary.client.verdict,
        records=outcome.records,
        records_file=outcome.records_file,
        result_file=outcome.result_file,
        exit_code=outcome.exit_code,
        summary=report.lines,
        run_summary=report.summary,
        notes=notes,
    )
