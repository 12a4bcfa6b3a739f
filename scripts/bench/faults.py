"""The fault suite: the real `loadgen run` against misbehaving servers and under process faults.

Each case starts what it needs on 127.0.0.1 (a misbehaving server from fault_servers.py in a
thread of this script, or the embedded mock through `--mock`), runs the real CLI
(`python -m loadgen run ... --workers 2 --save-result --save-detailed`) in its own process,
and checks what docs/reliability.md promises for it:

- the wall time is bounded (and, for a signal, the time from the signal to the exit);
- the exit code;
- where a result JSON is promised: completed + failed == the requests of the run, the counts
  expected, and each failure's reason in `errors`;
- no process left behind: every process the coordinator started (workers, the mock) is gone
  within 3 s of its exit, whatever ended it; after a clean exit its temporary files are gone
  too (the run's TMPDIR is the case's own);
- no Python traceback on stderr.

    python scripts/bench/faults.py [--only NAME ...] [--list] [--keep DIR]

It prints one row per case (case, expected, got: exit code, completed/failed, the POSTs the
fault server received, wall seconds; PASS, FAIL or SKIP), then why each failing case failed,
and exits 1 when any case failed. About 2.5 minutes on 2 cores.
Cases that need a flag `loadgen run --help` does not list are skipped, saying which.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import fault_servers as fs

REPO = Path(__file__).resolve().parents[2]
LEFT_GRACE_S = 3.0  # the coordinator's processes must be gone this long after it exits
TOKENS = ["--random-input-len", "8", "--random-output-len", "4"]
# A run that lasts: the mock's 16-token streams at 20 ms a token, 8 at once.
SLOW_MOCK = [
    "--mock", "--mock-itl-ms", "20", "--random-input-len", "16", "--random-output-len", "16",
    "--max-concurrency", "8",
]  # fmt: skip
SIGNALS = {"sigint": signal.SIGINT, "sigterm": signal.SIGTERM, "sigkill": signal.SIGKILL}


# --- processes --------------------------------------------------------------------------------


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of ``pid``, or None when it is gone."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    state, ppid = stat.rsplit(")", 1)[1].split()[:2]
    return state, int(ppid)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie does not)."""
    stat = _stat(pid)
    return stat is not None and stat[0] != "Z"


def descendants(root: int) -> set[int]:
    """The live processes under ``root``, at any depth."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(int(entry))) and stat[0] != "Z":
            children.setdefault(stat[1], []).append(int(entry))
    found: set[int] = set()
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_text().replace("\0", " ")
    except OSError:
        return ""


def workers_of(pid: int) -> list[int]:
    """The coordinator's worker processes (multiprocessing's spawn children)."""
    return sorted(p for p in descendants(pid) if "spawn_main" in cmdline(p))


# --- one run of the real CLI -----------------------------------------------------------------


@dataclass
class Outcome:
    """What one run of `loadgen run` did."""

    code: int | None = None
    wall_s: float = 0.0
    signal_to_exit_s: float | None = None
    stdout: str = ""
    stderr: str = ""
    result: dict | None = None
    records: list[Path] = field(default_factory=list)
    started: set[int] = field(default_factory=set)  # every process seen under the coordinator
    left: list[str] = field(default_factory=list)  # of them, alive LEFT_GRACE_S after its exit
    temp_left: list[str] = field(default_factory=list)  # files left in the run's TMPDIR
    posts: int | None = None  # POSTs the fault server received
    note: str = ""
    problems: list[str] = field(default_factory=list)  # found by the case itself
    signal_bound_s: float | None = None  # measured by the case itself: replaces Expect's


class Launch:
    """`loadgen run ARGS` in its own process, stdout and stderr to files, its process tree
    watched every 50 ms until it exits."""

    def __init__(
        self,
        work: Path,
        args: list[str],
        preexec: Callable[[], None] | None = None,
    ) -> None:
        self.work = work
        self.out_dir = work / "results"
        self.tmp = work / "tmp"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.stdout_path, self.stderr_path = work / "stdout.txt", work / "stderr.txt"
        env = {**os.environ, "TMPDIR": str(self.tmp), "PYTHONUNBUFFERED": "1"}
        env.pop("OPENAI_API_KEY", None)
        self.started = time.monotonic()
        with self.stdout_path.open("w") as out, self.stderr_path.open("w") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "loadgen", "run", *args],
                stdout=out,
                stderr=err,
                cwd=REPO,
                env=env,
                preexec_fn=preexec,
            )
        self.seen: set[int] = set()
        self.signalled: float | None = None
        self._watcher = threading.Thread(target=self._watch, daemon=True)
        self._watcher.start()

    def _watch(self) -> None:
        while self.proc.poll() is None:
            self.seen |= descendants(self.proc.pid)
            time.sleep(0.05)

    def stderr_text(self) -> str:
        return self.stderr_path.read_text(errors="replace")

    def wait_for(self, marker: str, timeout: float = 60.0) -> bool:
        """Until ``marker`` shows on stderr (False when the run ended or the time ran out)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if marker in self.stderr_text():
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.02)
        return False

    def wait_for_workers(self, count: int = 2, timeout: float = 60.0) -> list[int]:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and self.proc.poll() is None:
            if len(found := workers_of(self.proc.pid)) >= count:
                return found
            time.sleep(0.05)
        return []

    def signal(self, signum: int) -> None:
        self.signalled = time.monotonic()
        self.proc.send_signal(signum)

    def finish(self, timeout: float) -> Outcome:
        """Wait for the exit (killed after ``timeout`` s), then look at what it left."""
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            for pid in descendants(self.proc.pid) | {self.proc.pid}:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
            self.proc.wait()
        ended = time.monotonic()
        self._watcher.join(5)
        outcome = Outcome(
            code=self.proc.returncode,
            wall_s=ended - self.started,
            signal_to_exit_s=None if self.signalled is None else ended - self.signalled,
            stdout=self.stdout_path.read_text(errors="replace"),
            stderr=self.stderr_text(),
            started=set(self.seen),
        )
        while any(alive(p) for p in self.seen) and time.monotonic() - ended < LEFT_GRACE_S:
            time.sleep(0.05)
        outcome.left = [f"{p} {cmdline(p)[:60]}" for p in sorted(self.seen) if alive(p)]
        for pid in self.seen:  # the suite leaves nothing behind either
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        outcome.temp_left = sorted(p.name for p in self.tmp.iterdir())
        if self.out_dir.is_dir():
            results = sorted(p for p in self.out_dir.glob("*.json") if p.is_file())
            outcome.records = sorted(self.out_dir.glob("*.records.arrow"))
            if results:
                with contextlib.suppress(ValueError, OSError):
                    outcome.result = json.loads(results[0].read_text())
        return outcome


def result_args(work: Path) -> list[str]:
    return ["--save-result", "--save-detailed", "--result-dir", str(work / "results")]


def against(server: fs.FaultServer, work: Path, n: int, *extra: str) -> list[str]:
    """Flags of a run of ``n`` requests against ``server``."""
    return [
        "--base-url", server.url, "--model", "m", "--tokenizer", "loadgen-mock", *TOKENS,
        "--num-prompts", str(n), "--workers", "2", "--disable-tqdm", *result_args(work), *extra,
    ]  # fmt: skip


# --- checks ---------------------------------------------------------------------------------


@dataclass
class Expect:
    """What a case promises; None: not checked."""

    code: int | None  # the exit code; -9 for a process killed by SIGKILL
    bound_s: float  # the wall time, launch to exit
    n: int | None = None  # with a JSON: completed + failed must equal this
    json: bool | None = None  # a result JSON is written (True), or not (False)
    completed: int | None = None
    failed: int | None = None
    min_failed: int = 0
    min_completed: int = 0
    reasons: tuple[str, ...] = ()  # each must be in some failed request's error
    every_reason: tuple[str, ...] = ()  # each failed request's error has one of these
    stderr: tuple[str, ...] = ()  # each must be on stderr
    stderr_any: tuple[str, ...] = ()  # one of these must be on stderr
    stdout: tuple[str, ...] = ()
    signal_bound_s: float | None = None  # signal to exit
    records: bool = False  # a records file is kept
    posts: Callable[[int], bool] | None = None  # a check of the server's POST count
    posts_text: str = ""
    clean_temp: bool = True  # nothing left in the run's TMPDIR
    spawns_nothing: bool = False  # refused before any worker (or other process) starts
    result_check: Callable[[dict], str | None] | None = None  # a problem with the JSON, if any

    def text(self) -> str:
        parts = [f"exit {self.code}"]
        if self.completed is not None or self.failed is not None:
            parts.append(f"{_or(self.completed)}/{_or(self.failed)}")
        elif self.json is False:
            parts.append("no JSON")
        if self.every_reason or self.reasons:
            parts.append(repr((self.every_reason or self.reasons)[0]))
        elif self.stderr or self.stderr_any:
            parts.append(repr((self.stderr or self.stderr_any)[0][:34]))
        bound = f"<{self.signal_bound_s:g}s after signal" if self.signal_bound_s else ""
        parts.append(bound or f"<{self.bound_s:g}s")
        return ", ".join(parts)


def _or(value: int | None) -> str:
    return "*" if value is None else str(value)


def check(outcome: Outcome, expect: Expect) -> list[str]:
    """What in ``outcome`` breaks ``expect`` (empty: the case passes)."""
    problems = list(outcome.problems)
    if outcome.code != expect.code:
        problems.append(f"exit code {outcome.code}, expected {expect.code}")
    if outcome.wall_s > expect.bound_s:
        problems.append(f"took {outcome.wall_s:.1f} s, bound {expect.bound_s:g} s")
    signal_bound_s = outcome.signal_bound_s or expect.signal_bound_s
    if signal_bound_s is not None and (
        outcome.signal_to_exit_s is None or outcome.signal_to_exit_s > signal_bound_s
    ):
        problems.append(
            f"exited {_secs(outcome.signal_to_exit_s)} after the signal, "
            f"bound {signal_bound_s:.1f} s"
        )
    if "Traceback" in outcome.stderr:
        problems.append("a traceback on stderr")
    if outcome.left:
        problems.append(f"processes left {LEFT_GRACE_S:g} s after the exit: {outcome.left}")
    if expect.spawns_nothing and outcome.started:
        problems.append(f"{len(outcome.started)} processes started before the refusal")
    if expect.clean_temp and outcome.temp_left:
        problems.append(f"left in TMPDIR: {outcome.temp_left}")
    result = outcome.result
    if expect.json is True and result is None:
        problems.append("no result JSON")
    if expect.json is False and result is not None:
        problems.append("a result JSON was written")
    if result is not None:
        done, failed = result["completed"], result["failed"]
        # Upstream's failed counts the failed alone; a stop's cancelled and never-sent
        # requests are counted apart (loadgen.errors; docs/compat.md, "Failed, cancelled, not
        # sent").
        counts = result.get("loadgen", {}).get("errors") or {}
        stopped = counts.get("cancelled", 0) + counts.get("not_sent", 0)
        if expect.n is not None and done + failed + stopped != expect.n:
            problems.append(
                f"completed + failed + cancelled or not sent = {done} + {failed} + {stopped}, "
                f"not {expect.n}"
            )
        if expect.completed is not None and done != expect.completed:
            problems.append(f"completed {done}, expected {expect.completed}")
        if expect.failed is not None and failed != expect.failed:
            problems.append(f"failed {failed}, expected {expect.failed}")
        if failed < expect.min_failed:
            problems.append(f"failed {failed}, expected at least {expect.min_failed}")
        if done < expect.min_completed:
            problems.append(f"completed {done}, expected at least {expect.min_completed}")
        if expect.result_check is not None and (problem := expect.result_check(result)):
            problems.append(problem)
        errors = [e for e in result.get("errors", []) if e]
        if len(errors) != failed + stopped:
            problems.append(
                f"{failed} failed and {stopped} stopped requests, {len(errors)} reasons in errors"
            )
        for reason in expect.reasons:
            if not any(reason in e for e in errors):
                problems.append(f"no error has {reason!r}: {sorted(set(errors))[:3]}")
        if expect.every_reason:
            odd = sorted({e for e in errors if not any(r in e for r in expect.every_reason)})
            if odd:
                problems.append(f"errors without {expect.every_reason}: {odd[:3]}")
    for text in expect.stderr:
        if text not in outcome.stderr:
            problems.append(f"stderr lacks {text!r}: {_tail(outcome.stderr)}")
    if expect.stderr_any and not any(text in outcome.stderr for text in expect.stderr_any):
        problems.append(f"stderr has none of {expect.stderr_any}: {_tail(outcome.stderr)}")
    for text in expect.stdout:
        if text not in outcome.stdout:
            problems.append(f"stdout lacks {text!r}")
    if expect.records and not outcome.records:
        problems.append("no records file")
    if expect.posts is not None and (outcome.posts is None or not expect.posts(outcome.posts)):
        problems.append(f"the server got {outcome.posts} POSTs, expected {expect.posts_text}")
    return problems


def _secs(value: float | None) -> str:
    return "never" if value is None else f"{value:.1f} s"


def _tail(text: str) -> str:
    lines = [ln for ln in text.strip().splitlines() if "it/s]" not in ln]
    return repr(" | ".join(lines[-2:])[-300:])


# --- the cases -----------------------------------------------------------------------------


@dataclass
class Case:
    name: str
    group: str
    what: str  # the fault, in words
    expect: Expect
    body: Callable[[Path], Outcome]
    needs: tuple[str, ...] = ()  # flags `loadgen run --help` must list


CASES: list[Case] = []


def case(name: str, group: str, what: str, expect: Expect, needs: tuple[str, ...] = ()):
    def register(body: Callable[[Path], Outcome]) -> Callable[[Path], Outcome]:
        CASES.append(Case(name, group, what, expect, body, needs))
        return body

    return register


def server_case(
    name: str,
    what: str,
    expect: Expect,
    answer: fs.Answer,
    n: int,
    *extra: str,
    needs: tuple[str, ...] = (),
    **server_args: object,
) -> None:
    """A run of ``n`` requests against a FaultServer answering ``answer``."""

    def body(work: Path) -> Outcome:
        with fs.FaultServer(answer, **server_args) as server:  # type: ignore[arg-type]
            outcome = Launch(work, against(server, work, n, *extra)).finish(expect.bound_s + 10)
            outcome.posts = server.posts
        return outcome

    case(name, "server", what, expect, needs)(body)


def _all(n: int) -> Callable[[int], bool]:
    return lambda posts: posts == n


def _problems_are(result: dict, pattern: str) -> str | None:
    """A problem unless loadgen.worker_problems is one line matching ``pattern``."""
    problems = result["loadgen"]["worker_problems"]
    if len(problems) == 1 and re.fullmatch(pattern, problems[0]):
        return None
    return f"loadgen.worker_problems is {problems}, not one {pattern!r}"


def _loadgen_key(key: str, value: object) -> Callable[[dict], str | None]:
    """A check that the JSON's loadgen.KEY is ``value``."""

    def check(result: dict) -> str | None:
        got = result["loadgen"].get(key)
        return None if got == value else f"loadgen.{key} is {got!r}, not {value!r}"

    return check


# Server faults.

N = 6
server_case(
    "hang_after_headers",
    "200 and headers, then nothing (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("idle timeout",)),
    fs.every_other(fs.hang_after_headers), N, "--idle-timeout", "1",
    needs=("--idle-timeout",),
)  # fmt: skip
server_case(
    "stall_mid_stream",
    "headers and 2 events, then nothing (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("idle timeout",)),
    fs.every_other(fs.stall_mid_stream), N, "--idle-timeout", "1",
    needs=("--idle-timeout",),
)  # fmt: skip
server_case(
    "endless_stream",
    "an event every 50 ms forever, no [DONE] (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("request timeout",)),
    fs.every_other(fs.endless), N, "--request-timeout", "3",
    needs=("--request-timeout",),
)  # fmt: skip
server_case(
    "endless_stream_guard",
    "the same without --request-timeout: the output guard cuts it",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("output guard",)),
    fs.every_other(fs.endless), N,
)  # fmt: skip
server_case(
    "endless_pings",
    "a token, then ': ping' comments forever, no --request-timeout",
    Expect(0, 15, n=N, json=True, completed=3, failed=3,
           every_reason=("output guard", "request timeout")),
    fs.every_other(fs.endless_pings), N,
)  # fmt: skip
server_case(
    "rst_mid_stream",
    "2 events, then a TCP reset (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("Error",),
           posts=_all(N), posts_text=f"{N} (no re-send after answer bytes)"),
    fs.every_other(fs.reset_mid_stream), N,
)  # fmt: skip
server_case(
    "rst_before_answer",
    "a TCP reset before any answer byte (every request)",
    Expect(1, 25, n=4, json=True, completed=0, failed=4, every_reason=("Error",),
           stderr=("every request failed",),
           posts=lambda p: 4 <= p <= 8, posts_text="4..8 (at most one re-send each)"),
    fs.reset_before_answer, 4,
)  # fmt: skip
server_case(
    "eof_without_done",
    "tokens and usage, then the body ends without data: [DONE]",
    Expect(0, 25, n=N, json=True, completed=N, failed=0,
           stdout=(f"warning: {N} streams ended without data: [DONE]",),
           result_check=_loadgen_key("truncated_streams", N)),
    fs.eof_without_done, N,
)  # fmt: skip
server_case(
    "html_body",
    "200 with an HTML page",
    Expect(1, 25, n=N, json=True, completed=0, failed=N,
           every_reason=("the answer is not SSE",), stderr=("every request failed",)),
    fs.html_page, N,
)  # fmt: skip
server_case(
    "data_not_json",
    "200, a token, then 'data: not json' (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("is not a JSON object",)),
    fs.every_other(fs.data_not_json), N,
)  # fmt: skip
server_case(
    "error_event",
    "200, 2 tokens, then vLLM's error event (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3,
           every_reason=("error in the stream: Internal server error",)),
    fs.every_other(fs.error_event_after_tokens), N,
)  # fmt: skip
for code, reason in ((429, "Too Many Requests"), (503, "Service Unavailable"),
                     (500, "Internal Server Error")):  # fmt: skip
    server_case(
        f"status_{code}",
        f"HTTP {code} for every request (no fail-fast: sent all)",
        Expect(1, 25, n=24, json=True, completed=0, failed=24, every_reason=(f"HTTP {code}",),
               stderr=("every request failed",), posts=_all(24), posts_text="24"),
        fs.status(code, reason, f"the fault server says {code}"), 24, "--max-concurrency", "4",
    )  # fmt: skip
server_case(
    "status_401",
    "HTTP 401 for every request: fail-fast",
    Expect(1, 25, json=False, stderr=("error: the first 20 requests all failed with 'HTTP 401",),
           records=True, posts=lambda p: p < 150, posts_text="< 150 (stopped early)"),
    fs.status(401, "Unauthorized", "Invalid API key"), 300, "--max-concurrency", "2",
)  # fmt: skip
server_case(
    "idle_keepalive_close",
    "the server closes connections idle 0.2 s (paced run)",
    Expect(0, 25, n=16, json=True, completed=16, failed=0),
    fs.paced(4, 0.01), 16, "--request-rate", "6", idle_close_s=0.2,
)  # fmt: skip
server_case(
    "connection_close",
    "Connection: close on every answer",
    Expect(0, 25, n=12, json=True, completed=12, failed=0, posts=_all(12), posts_text="12"),
    fs.good, 12, "--max-concurrency", "2", connection_close=True,
)  # fmt: skip
server_case(
    "close_after_answer",
    "closes 0.5 ms after every answer, keep-alive implied (llama.cpp)",
    Expect(0, 25, n=20, json=True, completed=20, failed=0),
    fs.good, 20, "--max-concurrency", "2", close_after_s=0.0005,
)  # fmt: skip
server_case(
    "big_event_5mb",
    "one 5 MB event written in 4 KiB pieces",
    Expect(0, 40, n=4, json=True, completed=4, failed=0,
           result_check=lambda r: None if r["output_lens"] == [2] * 4 else "output_lens"),
    fs.big_event, 4, "--max-concurrency", "2",
)  # fmt: skip


@case(
    "server_restart",
    "server",
    "the server goes away for 1 s mid-run and comes back on its port",
    Expect(0, 30, n=30, json=True, min_failed=1, min_completed=10,
           every_reason=("Error", "Disconnected", "Cannot connect")),
)  # fmt: skip
def server_restart(work: Path) -> Outcome:
    with fs.FaultServer(fs.paced(8, 0.02)) as server:
        launch = Launch(work, against(server, work, 30, "--request-rate", "10"))
        if server.first_post.wait(60):
            time.sleep(0.8)
            server.restart(1.0)
        outcome = launch.finish(60)
        outcome.posts = server.posts
    return outcome


@case(
    "server_down",
    "server",
    "nothing listens on the port (no --ready-check-timeout-sec)",
    Expect(1, 20, json=False, stderr=("error: cannot connect to the server at",)),
)
def server_down(work: Path) -> Outcome:
    port = free_port()
    args = ["--base-url", f"http://127.0.0.1:{port}", "--model", "m", "--tokenizer",
            "loadgen-mock", *TOKENS, "--num-prompts", "4", "--workers", "2",
            "--disable-tqdm", *result_args(work)]  # fmt: skip
    return Launch(work, args).finish(50)


@case(
    "connect_hangs",
    "server",
    "the server's accept queue is full: connecting hangs (--connect-timeout 1)",
    # Pre-opening (about 1 s) and the 1 s connect timeout race: either the run is refused in
    # one line, or it runs and every request fails with the timeout.
    Expect(
        1,
        25,
        n=4,
        completed=0,
        failed=4,
        every_reason=("connect timeout: no connection within 1 s (--connect-timeout)",),
        stderr_any=("every request failed", "error: cannot connect to the server at"),
    ),
    needs=("--connect-timeout",),
)
def connect_hangs(work: Path) -> Outcome:
    with full_listener() as port:
        args = ["--base-url", f"http://127.0.0.1:{port}", "--model", "m", "--tokenizer",
                "loadgen-mock", *TOKENS, "--num-prompts", "4", "--workers", "2",
                "--disable-tqdm", "--connect-timeout", "1", *result_args(work)]  # fmt: skip
        outcome = Launch(work, args).finish(55)
    return outcome


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@contextlib.contextmanager
def full_listener() -> Iterator[int]:
    """A port that listens and never accepts, its accept queue filled: a SYN gets no answer."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(0)
    port = listener.getsockname()[1]
    fillers = []
    try:
        for _ in range(4):
            filler = socket.socket()
            filler.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                filler.connect(("127.0.0.1", port))
            fillers.append(filler)
        time.sleep(0.2)
        yield port
    finally:
        for sock in [*fillers, listener]:
            sock.close()


# Process faults.


@case(
    "worker_sigkill",
    "process",
    "SIGKILL one worker mid-run",
    Expect(1, 40, n=100, json=True, min_failed=1, min_completed=1,
           reasons=("died (exit code -9)",), stderr=("error: the run lost workers",),
           records=True,
           result_check=lambda r: _problems_are(r, r"worker \d died \(exit code -9\)")),
)  # fmt: skip
def worker_sigkill(work: Path) -> Outcome:
    launch = Launch(
        work, [*SLOW_MOCK, "--num-prompts", "100", "--workers", "2", *result_args(work)]
    )
    note = "t0 not seen"
    if launch.wait_for("%|"):
        time.sleep(0.5)
        if workers := workers_of(launch.proc.pid):
            os.kill(workers[0], signal.SIGKILL)
            note = ""
    outcome = launch.finish(70)
    outcome.note = note
    return outcome


@case(
    "worker_sigstop",
    "process",
    "SIGSTOP one worker mid-run, then SIGINT the coordinator",
    Expect(130, 40, n=100, json=True, signal_bound_s=10, stderr=("interrupted",), records=True,
           result_check=lambda r: _problems_are(r, r"worker \d did not stop within 5 s")),
)  # fmt: skip
def worker_sigstop(work: Path) -> Outcome:
    launch = Launch(
        work, [*SLOW_MOCK, "--num-prompts", "100", "--workers", "2", *result_args(work)]
    )
    note = "t0 not seen"
    if launch.wait_for("%|"):
        time.sleep(0.5)
        if workers := workers_of(launch.proc.pid):
            os.kill(workers[0], signal.SIGSTOP)
            launch.signal(signal.SIGINT)
            note = ""
    outcome = launch.finish(70)
    outcome.note = note
    return outcome


def _stopped_code(signum: int) -> int:
    return -9 if signum == signal.SIGKILL else 128 + signum


def coordinator_case(phase: str, name: str, signum: int) -> None:
    """``signum`` to the coordinator in ``phase``: waiting for the server, building the
    dataset, mid-run, or reporting (re-tokenizing the output after the run)."""
    killed = signum == signal.SIGKILL
    code = _stopped_code(signum)
    interrupted = () if killed else ("interrupted",)
    if phase in ("waiting", "preparing"):
        what = (
            "while it waits for a server that is not up"
            if phase == "waiting"
            else "while it builds the dataset (1200 prompts of 2048 tokens)"
        )
        expect = Expect(code, 40, json=False, signal_bound_s=2, clean_temp=not killed)
        expect.stderr = () if killed else ("interrupted before the run started",)
    elif phase == "mid_run":
        what = "mid-run"
        expect = Expect(code, 30, signal_bound_s=5, records=True, stderr=interrupted)
        if killed:
            expect.json, expect.clean_temp = False, False
        else:
            expect.json, expect.n = True, 200
            expect.every_reason = ("cancelled:", "not sent:")
            expect.result_check = _loadgen_key("interrupted", True)
    else:
        what = "while it reports (re-tokenizing 8 MB of output)"
        expect = Expect(code, 40, signal_bound_s=3, records=True, stderr=interrupted)
        if killed:
            expect.json, expect.clean_temp = False, False

    def body(work: Path) -> Outcome:
        if phase == "reporting":
            return _signal_while_reporting(work, signum)
        if phase == "mid_run":
            args = [*SLOW_MOCK, "--num-prompts", "200", "--workers", "2", *result_args(work)]
        else:
            args = [
                "--base-url", f"http://127.0.0.1:{free_port()}", "--model", "m",
                "--tokenizer", "loadgen-mock", "--workers", "2", "--max-concurrency", "4",
                "--ready-check-timeout-sec", "60", "--ready-check-interval-sec", "0.2",
                *result_args(work),
            ]  # fmt: skip
            if phase == "preparing":
                args += ["--num-prompts", "1200", "--random-input-len", "2048",
                         "--random-output-len", "4"]  # fmt: skip
            else:
                args += ["--num-prompts", "10", *TOKENS]
        launch = Launch(work, args)
        note = ""
        if phase == "mid_run":
            ready = launch.wait_for("%|")
            time.sleep(0.5)
        else:
            ready = bool(launch.wait_for_workers(2))
            time.sleep(1.5)  # the workers are up; the coordinator builds, or waits
            if "Starting main benchmark run" in launch.stdout_path.read_text():
                note = "the run started before the signal"
        if ready:
            launch.signal(signum)
        else:
            note = "the phase was not reached"
        outcome = launch.finish(expect.bound_s + 30)
        outcome.note = note
        return outcome

    case(f"coordinator_{name}_{phase}", "process", f"{name.upper()} {what}", expect)(body)


def _signal_while_reporting(work: Path, signum: int) -> Outcome:
    text = " word" * 200_000  # 1 MB a response, no usage: the coordinator re-tokenizes it

    async def no_usage(conn: fs.Conn, k: int, n: int) -> None:
        conn.head()
        await conn.chunk(fs.token_event(0, text) + fs.DONE)
        await conn.end()

    def flags(server: fs.FaultServer, where: Path) -> list[str]:
        # max_tokens 8000: the kept text's cap (64 characters per guard event) is over 1 MB.
        args = against(server, where, 8, "--max-concurrency", "4", "--random-output-len", "8000")
        args.remove("--disable-tqdm")  # its 100% bar marks the end of the timed run
        return args

    with fs.FaultServer(no_usage) as server:
        # The first signal lets the report finish (by design): the bound is what the same
        # report takes here without one, measured first, doubled (a busy machine's load
        # swings 2x in seconds), and 3 s at least.
        bound_s = 3.0
        if signum != signal.SIGKILL:
            unsignalled = Launch(work / "unsignalled", flags(server, work / "unsignalled"))
            if unsignalled.wait_for("100%|"):
                seen = time.monotonic()
                unsignalled.finish(70)
                bound_s = max(bound_s, 2 * (time.monotonic() - seen) + 1)
        posts_before = server.posts
        launch = Launch(work, flags(server, work))
        note = ""
        if launch.wait_for("100%|"):
            time.sleep(0.5)  # past the timed run: output lengths, then the report
            if "Serving Benchmark Result" in launch.stdout_path.read_text():
                note = "the summary was out before the signal"
            launch.signal(signum)
        else:
            note = "the end of the run was not seen"
        outcome = launch.finish(70)
        outcome.note = note
        outcome.posts = server.posts - posts_before
        outcome.signal_bound_s = bound_s
    return outcome


for _phase in ("waiting", "preparing", "mid_run", "reporting"):
    for _name, _signum in SIGNALS.items():
        coordinator_case(_phase, _name, _signum)


@case(
    "result_dir_under_file",
    "process",
    "--result-dir under a regular file",
    Expect(
        1,
        20,
        json=False,
        stderr=("is not a directory",),
        posts=_all(0),
        posts_text="0",
        spawns_nothing=True,
    ),
)
def result_dir_under_file(work: Path) -> Outcome:
    (work / "file").write_text("x")
    with fs.FaultServer() as server:
        args = against(server, work, 4)
        args[args.index("--result-dir") + 1] = str(work / "file" / "results")
        outcome = Launch(work, args).finish(50)
        outcome.posts = server.posts
    return outcome


@case(
    "result_write_fails",
    "process",
    "the result file cannot be written at the end (/dev/full)",
    Expect(1, 25, stderr=("error: cannot write the result file",), records=True,
           posts=_all(6), posts_text="6"),
)  # fmt: skip
def result_write_fails(work: Path) -> Outcome:
    if not os.path.exists("/dev/full"):
        raise Skip("no /dev/full")
    (work / "results").mkdir(parents=True)
    (work / "results" / "out.json").symlink_to("/dev/full")
    with fs.FaultServer() as server:
        args = against(server, work, 6, "--result-filename", "out.json")
        outcome = Launch(work, args).finish(55)
        outcome.posts = server.posts
    return outcome


@case(
    "low_fd_limit",
    "process",
    "open-file limit 256 with --max-concurrency 1000",
    Expect(1, 20, json=False, stderr=("error: the open-file limit is 256",), posts=_all(0),
           posts_text="0", spawns_nothing=True),
)  # fmt: skip
def low_fd_limit(work: Path) -> Outcome:
    def low_limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    with fs.FaultServer() as server:
        args = against(server, work, 2000, "--max-concurrency", "1000")
        outcome = Launch(work, args, preexec=low_limit).finish(50)
        outcome.posts = server.posts
    return outcome


class Skip(Exception):
    """The case cannot run here; the message says why."""


# --- issue 27: small (preflight probe, terminal escapes) ------------------------------------

CLONE_NEWNS = 0x00020000  # <sched.h>
MS_RDONLY, MS_REMOUNT, MS_BIND, MS_REC, MS_PRIVATE = 1, 32, 4096, 16384, 1 << 18  # <sys/mount.h>
CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")  # a control character but a line feed


def read_only_mount(directory: Path) -> Callable[[], None]:
    """A ``preexec`` that gives the run a mount namespace of its own in which ``directory`` is a
    read-only bind mount of itself (nothing outside the run sees it); Skip where this machine
    cannot make one (neither root nor a user namespace)."""
    if shutil.which("unshare") is None:
        raise Skip("no unshare (util-linux) to try a read-only bind mount")
    probe = subprocess.run(
        ["unshare", "--mount", "sh", "-c",
         'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0"', str(directory)],
        capture_output=True, text=True,
    )  # fmt: skip
    if probe.returncode != 0:
        raise Skip(f"no read-only bind mount here: {probe.stderr.strip()[:60]}")
    import ctypes

    libc = ctypes.CDLL(None, use_errno=True)
    path = str(directory).encode()

    def preexec() -> None:
        for result in (
            lambda: libc.unshare(CLONE_NEWNS),
            lambda: libc.mount(None, b"/", None, MS_REC | MS_PRIVATE, None),
            lambda: libc.mount(path, path, None, MS_BIND, None),
            lambda: libc.mount(None, path, None, MS_REMOUNT | MS_BIND | MS_RDONLY, None),
        ):
            if result() != 0:
                raise OSError(ctypes.get_errno(), "read-only bind mount")

    return preexec


def _refused_before_sending(
    work: Path, result_dir: str, preexec: Callable[[], None] | None = None
) -> Outcome:
    with fs.FaultServer() as server:
        args = against(server, work, 4)
        args[args.index("--result-dir") + 1] = result_dir
        outcome = Launch(work, args, preexec=preexec).finish(50)
        outcome.posts = server.posts
    return outcome


@case(
    "result_dir_proc",
    "process",
    "--result-dir /proc/x: the permission bits pass (root), no file can be made there",
    Expect(1, 20, json=False,
           stderr=("error: --result-dir /proc/x: /proc is not writable: a file cannot be created",),
           posts=_all(0), posts_text="0", spawns_nothing=True),
)  # fmt: skip
def result_dir_proc(work: Path) -> Outcome:
    return _refused_before_sending(work, "/proc/x")


@case(
    "result_dir_readonly",
    "process",
    "--result-dir on a read-only bind mount (the run's own mount namespace)",
    Expect(1, 20, json=False,
           stderr=("is not writable: a file cannot be created there (Read-only file system)",),
           posts=_all(0), posts_text="0", spawns_nothing=True),
)  # fmt: skip
def result_dir_readonly(work: Path) -> Outcome:
    results = work / "readonly"
    results.mkdir()
    outcome = _refused_before_sending(work, str(results), read_only_mount(results))
    if left := list(results.iterdir()):
        outcome.problems.append(f"left in the result directory: {left}")
    return outcome


@case(
    "escape_codes_in_errors",
    "server",
    "ANSI, OSC title, BEL and a line break in error texts and in /v1/models' model id",
    Expect(0, 25, n=12, json=True, completed=4, failed=8,
           stdout=("First model name: m, first model id: m",
                   "Error 0: ", "red bell two error: forged line")),
)  # fmt: skip
def escape_codes_in_errors(work: Path) -> Outcome:
    with fs.EscapingServer(fs.escape_codes) as server:
        args = against(server, work, 12, "--max-concurrency", "2")
        for flag in ("--model", "m", "--disable-tqdm"):  # the server's model; the live view
            args.remove(flag)
        outcome = Launch(work, args).finish(35)
        outcome.posts = server.posts
    for name, text in (("stdout", outcome.stdout), ("stderr", outcome.stderr)):
        if raw := [line for line in text.splitlines() if CONTROL.search(line)]:
            outcome.problems.append(f"{len(raw)} {name} lines with control characters: {raw[0]!r}")
    if raw := [p.name for p in (work / "results").iterdir() if CONTROL.search(p.name)]:
        outcome.problems.append(f"control characters in result file names: {raw[0]!r}")
    return outcome


# --- the table --------------------------------------------------------------------------------


# --- issue 27: multi-turn ---
# The repro: 12 conversations of 2 to 4 turns, 2 workers sharing a cap of 4, against a
# chat server that spoils every 3rd POST. The run ends by itself, every turn is one record, a
# failed turn's later turns are "not sent: an earlier turn of this conversation failed (turn k:
# <its error>)", and the server got exactly the turns that were sent.

MULTI_TURN = [
    "--backend", "openai-chat", "--endpoint", "/v1/chat/completions", "--multi-turn",
    "--multi-turn-min-turns", "2", "--multi-turn-max-turns", "4", "--random-input-len", "16",
    "--per-turn-input-len", "8", "--random-output-len", "5", "--max-concurrency", "4",
]  # fmt: skip
LATER_TURN = "not sent: an earlier turn of this conversation failed (turn "


def multi_turn_case(name: str, what: str, bad: fs.Answer, reason: str, *extra: str) -> None:
    def body(work: Path) -> Outcome:
        with fs.FaultServer(fs.every_third(bad)) as server:
            args = against(server, work, 12, *MULTI_TURN, *extra)
            outcome = Launch(work, args).finish(MULTI_TURN_BOUND_S + 10)
            outcome.posts = server.posts
        result = outcome.result
        if result is None:
            return outcome
        errors = result["errors"]
        spoiled = [e for e in errors if e.startswith(reason)]
        later = [e for e in errors if e.startswith(LATER_TURN)]
        figures = result["loadgen"]["multi_turn"]
        turns = sum(
            t["completed"] + t["failed"] + t.get("cancelled", 0) + t.get("not_sent", 0)
            for t in figures["per_turn"]
        )
        problems = outcome.problems
        if len(errors) != turns:
            problems.append(f"{len(errors)} records for {turns} turns")
        if len(spoiled) != server.posts // 3 or not spoiled:
            problems.append(f"{len(spoiled)} {reason!r} failures for {server.posts} POSTs")
        if result["completed"] + len(spoiled) != server.posts:
            problems.append(f"{result['completed']} + {len(spoiled)} != {server.posts} POSTs")
        if not later or any(f": {reason}" not in e for e in later):
            problems.append(f"later turns' reasons: {sorted(set(later))[:2]}")
        counts = result["loadgen"]["errors"]  # the later turns: never sent, counted apart
        if (len(spoiled), len(later)) != (result["failed"], counts["not_sent"]):
            problems.append(f"other failures: {sorted(set(errors) - {''})[:3]}")
        if figures["conversations"] != 12 or figures["failed"] != len(spoiled):
            problems.append(f"conversations {figures['conversations']}, failed {figures['failed']}")
        return outcome

    case(
        name,
        "server",
        what,
        Expect(0, MULTI_TURN_BOUND_S, json=True, min_failed=1, min_completed=1,
               every_reason=(reason, LATER_TURN)),
        needs=("--multi-turn",),
    )(body)  # fmt: skip


MULTI_TURN_BOUND_S = 30  # the run takes 2-4 s on 2 busy cores; before issue 27 it hung
multi_turn_case(
    "multi_turn_500",
    "--multi-turn, HTTP 500 on every 3rd POST",
    fs.status(500, "Internal Server Error", "every third"),
    "HTTP 500",
)
multi_turn_case(
    "multi_turn_rst",
    "--multi-turn, a TCP reset mid-stream on every 3rd POST",
    fs.chat_reset_mid_stream,
    "ClientPayloadError",
)
multi_turn_case(
    "multi_turn_stall",
    "--multi-turn, a stall mid-stream on every 3rd POST (--idle-timeout 1)",
    fs.chat_stall_mid_stream,
    "idle timeout",
    "--idle-timeout",
    "1",
)

# --- issue 27: answer bounds ---

PEAK_RSS_BOUND = 2**30  # the coordinator's peak RSS with two 100 MB lines (14.9 GB before)
# A safety net: the coordinator under this data limit (RLIMIT_DATA: memory written to, not
# address space reserved) fails the case with MemoryError rather than take the machine.
DATA_LIMIT = 4 * 2**30


def peak_rss(pid: int, stop: threading.Event, peak: list[int]) -> None:
    """Until ``stop``: the process's peak RSS (VmHWM) in bytes, read every 20 ms, in peak[0]."""
    while not stop.is_set():
        with contextlib.suppress(OSError, ValueError, IndexError):
            status = Path(f"/proc/{pid}/status").read_text()
            kib = int(status.split("VmHWM:")[1].split()[0])
            peak[0] = max(peak[0], kib * 1024)
        time.sleep(0.02)


@case(
    "huge_sse_line",
    "server",
    "one 100 MB SSE line (every other request): the coordinator's peak RSS < 1 GiB",
    Expect(0, 60, n=4, json=True, completed=2, failed=2,
           every_reason=("EventTooLarge: an SSE event longer than 16 MiB",)),
)  # fmt: skip
def huge_sse_line(work: Path) -> Outcome:
    def limit_memory() -> None:
        resource.setrlimit(resource.RLIMIT_DATA, (DATA_LIMIT, DATA_LIMIT))

    with fs.FaultServer(fs.every_other(fs.huge_sse_line)) as server:
        launch = Launch(work, against(server, work, 4), preexec=limit_memory)
        stop, peak = threading.Event(), [0]
        sampler = threading.Thread(target=peak_rss, args=(launch.proc.pid, stop, peak))
        sampler.start()
        outcome = launch.finish(70)
        stop.set()
        sampler.join()
        outcome.posts = server.posts
    outcome.note = f"coordinator peak RSS {peak[0] / 2**20:.0f} MiB"
    print(f"huge_sse_line: {outcome.note}", flush=True)
    if peak[0] >= PEAK_RSS_BOUND:
        outcome.problems.append(f"{outcome.note}, bound {PEAK_RSS_BOUND / 2**20:.0f} MiB")
    return outcome


server_case(
    "data_not_json_with_choices",
    "data events that are not JSON but hold \"choices\":[{ (every other request)",
    Expect(0, 25, n=N, json=True, completed=3, failed=3, every_reason=("is not a JSON object",)),
    fs.every_other(fs.data_not_json_with_choices), N,
)  # fmt: skip
server_case(
    "text_capped",
    "4 events of 2000 characters, no usage: more text than the cap of 4 max_tokens",
    Expect(0, 25, n=N, json=True, completed=N, failed=0,
           stdout=(f"note: {N} requests sent more text than kept",),
           result_check=_loadgen_key("text_capped", N)),
    fs.long_text_no_usage, N,
)  # fmt: skip


# --- issue 27: records ---


def _loadgen(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``loadgen ARGS`` (report, compare) in its own process."""
    return subprocess.run(
        [sys.executable, "-m", "loadgen", *args],
        capture_output=True, text=True, cwd=REPO, timeout=timeout,
    )  # fmt: skip


def _batch_ends(path: Path) -> list[int]:
    """The byte where each batch of a records file ends (up to where it can be read)."""
    import pyarrow as pa  # the suite's other cases need no Arrow
    import pyarrow.ipc as ipc

    source = pa.BufferReader(pa.py_buffer(path.read_bytes()[8:]))
    ends: list[int] = []
    with contextlib.suppress(StopIteration, OSError, pa.ArrowException):
        stream = ipc.open_stream(source)  # (no schema: no batch)
        while True:
            stream.read_next_batch()
            ends.append(8 + source.tell())
    return ends


@case(
    "records_torn",
    "process",
    "SIGKILL mid-run, the records file then cut inside each of its last 3 batches",
    Expect(0, 60, stderr=("the run did not end",), stdout=("Serving Benchmark Result",),
           clean_temp=False),
)  # fmt: skip
def records_torn(work: Path) -> Outcome:
    launch = Launch(work, [*SLOW_MOCK, "--num-prompts", "200", "--workers", "2",
                           *result_args(work)])  # fmt: skip
    if launch.wait_for("%|"):
        time.sleep(5.0)  # the file writes each second's batches as one: 5 of the 8 s run
        launch.signal(signal.SIGKILL)
    killed = launch.finish(40)
    if not killed.records:
        return Outcome(code=killed.code, left=killed.left, problems=["no records file"])
    whole = killed.records[0]
    data, ends = whole.read_bytes(), _batch_ends(whole)
    if len(ends) < 4:
        return Outcome(code=killed.code, problems=[f"{len(ends) - 1} row batches, not 3+"])
    cut, problems, report = work / "cut.records.arrow", [], None
    began = time.monotonic()
    for start, end in zip(ends[-4:-1], ends[-3:], strict=True):  # a write killed half-way
        cut.write_bytes(data[: (start + end) // 2])
        report = _loadgen("report", str(cut))
        if report.returncode != 0 or "Traceback" in report.stderr:
            problems.append(f"report of a file cut at {(start + end) // 2}: {_tail(report.stderr)}")
    compared = _loadgen("compare", str(whole), str(cut), "--resamples", "20")
    if compared.returncode != 0 or "Traceback" in compared.stderr:
        problems.append(f"compare exit {compared.returncode}: {_tail(compared.stderr)}")
    assert report is not None
    return Outcome(
        code=report.returncode, wall_s=time.monotonic() - began, stdout=report.stdout,
        stderr=report.stderr + compared.stderr, left=killed.left, problems=problems,
    )  # fmt: skip


@contextlib.contextmanager
def _small_disk(path: Path, size: str) -> Iterator[Callable[[], None] | None]:
    """A ``size`` tmpfs at ``path`` (root); elsewhere None, and the case limits file sizes
    instead (RLIMIT_FSIZE: a write past it fails with EFBIG, as on a full disk)."""
    path.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)]
    mounted = os.geteuid() == 0 and subprocess.run(mount, capture_output=True).returncode == 0
    try:
        yield None if mounted else (lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (8000,) * 2))
    finally:
        if mounted:
            subprocess.run(["umount", str(path)], capture_output=True)


@case(
    "records_disk_full",
    "process",
    "the disk fills mid-run (a 64 KiB tmpfs as --result-dir; RLIMIT_FSIZE when not root)",
    Expect(1, 40, json=False, records=True, stdout=("Serving Benchmark Result",),
           stderr=("error: cannot write the result file",)),
)  # fmt: skip
def records_disk_full(work: Path) -> Outcome:
    args = [
        "--mock", "--random-input-len", "16", "--random-output-len", "16", "--num-prompts", "400",
        "--workers", "2", "--disable-tqdm", *result_args(work),
    ]  # fmt: skip
    with _small_disk(work / "results", "64k") as limit:
        outcome = Launch(work, args, preexec=limit).finish(50)
        warnings = [ln for ln in outcome.stdout.splitlines() if ln.startswith("warning: records")]
        if len(warnings) != 1 or "the records stop here" not in warnings[0]:
            outcome.problems.append(f"{len(warnings)} 'warning: records file' lines, not 1")
        if list((work / "results").glob("*.json")):
            outcome.problems.append("a result file was left")
        for records in outcome.records:  # what the disk held reads as a run that did not end
            report = _loadgen("report", str(records))
            if report.returncode != 0 or "the run did not end" not in report.stderr:
                outcome.problems.append(f"report exit {report.returncode}: {_tail(report.stderr)}")
    return outcome


# --- issue 27: remote workers' channel ---


def _keygen(work: Path) -> Path:
    """A coordinator.key and worker.key for a case, outside the run's TMPDIR."""
    keys = work / "keys"
    subprocess.run(
        [sys.executable, "-m", "loadgen", "keygen", str(keys)],
        check=True, capture_output=True, cwd=REPO, timeout=60,
    )  # fmt: skip
    return keys


def _listening(keys: Path, port: int, remote: int, work: Path, n: int) -> list[str]:
    """Flags of a --mock run of ``n`` requests, one local worker, waiting for ``remote`` more."""
    return [
        "--mock", *TOKENS, "--num-prompts", str(n), "--workers", "1", "--disable-tqdm",
        "--listen", f"127.0.0.1:{port}", "--remote-workers", str(remote),
        "--key", str(keys / "coordinator.key"), *result_args(work),
    ]  # fmt: skip


def _remote_worker(keys: Path, port: int, work: Path, name: str) -> subprocess.Popen:
    with (work / f"{name}.stderr.txt").open("w") as err:
        return subprocess.Popen(
            [sys.executable, "-m", "loadgen", "worker", "--connect", f"tcp://127.0.0.1:{port}",
             "--key", str(keys / "worker.key"), "--join-timeout-sec", "60"],
            stdout=subprocess.DEVNULL, stderr=err, cwd=REPO,
        )  # fmt: skip


def _stdout_lines(launch: Launch, text: str, count: int = 1, timeout: float = 60.0) -> bool:
    """Until ``count`` lines of the coordinator's stdout hold ``text`` (False: it ended or the
    time ran out)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and launch.proc.poll() is None:
        if launch.stdout_path.read_text(errors="replace").count(text) >= count:
            return True
        time.sleep(0.02)
    return False


@case(
    "signal_waiting_for_workers",
    "process",
    "SIGINT while the coordinator waits for --remote-workers 2 to join",
    Expect(130, 30, json=False, signal_bound_s=2, stderr=("workers had joined",)),
    needs=("--remote-workers",),
)
def signal_waiting_for_workers(work: Path) -> Outcome:
    keys = _keygen(work)
    launch = Launch(work, _listening(keys, free_port(), 2, work, 10))
    note = "the wait for workers was not seen"
    if _stdout_lines(launch, "Waiting for 2 remote workers"):
        time.sleep(1.0)  # the dataset (10 prompts) is built: the coordinator waits
        launch.signal(signal.SIGINT)
        note = ""
    outcome = launch.finish(40)
    outcome.note = note
    return outcome


@case(
    "remote_worker_vanishes",
    "process",
    "a remote worker joins, is SIGKILLed before the run, and two more join",
    Expect(0, 60, n=10, json=True, completed=10, failed=0,
           stderr=("is gone before the run; its place is open to another worker",)),
    needs=("--remote-workers",),
)  # fmt: skip
def remote_worker_vanishes(work: Path) -> Outcome:
    keys = _keygen(work)
    port = free_port()
    launch = Launch(work, _listening(keys, port, 2, work, 10))
    remotes = [_remote_worker(keys, port, work, "a")]
    note = "the first worker did not join"
    try:
        if _stdout_lines(launch, " joined ("):
            remotes[0].kill()  # its socket is gone; the coordinator still counts it joined
            remotes[0].wait()
            remotes.append(_remote_worker(keys, port, work, "b"))  # the count is complete
            note = "the second worker did not join"
            if _stdout_lines(launch, " joined (", 2):
                remotes.append(_remote_worker(keys, port, work, "c"))  # the vanished one's place
                note = ""
        outcome = launch.finish(70)
    finally:
        for remote in remotes:
            remote.kill()
            remote.wait()
    outcome.note = note
    return outcome


def run_help() -> str:
    return subprocess.run(
        [sys.executable, "-m", "loadgen", "run", "--help"],
        capture_output=True, text=True, cwd=REPO, timeout=60,
    ).stdout  # fmt: skip


def got_text(outcome: Outcome) -> str:
    parts = [f"exit {outcome.code}"]
    if outcome.result is not None:
        parts.append(f"{outcome.result['completed']}/{outcome.result['failed']}")
    else:
        parts.append("no JSON")
    if outcome.posts is not None:
        parts.append(f"{outcome.posts} sent")
    parts.append(f"{outcome.wall_s:.1f}s")
    if outcome.signal_to_exit_s is not None:
        parts.append(f"sig->exit {outcome.signal_to_exit_s:.1f}s")
    return ", ".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", metavar="NAME", help="cases to run (prefixes)")
    parser.add_argument("--list", action="store_true", help="list the cases and exit")
    parser.add_argument("--keep", type=Path, help="keep every case's files under this dir")
    args = parser.parse_args()
    cases = CASES
    if args.only:
        cases = [c for c in CASES if any(c.name.startswith(p) for p in args.only)]
        if not cases:
            parser.error(f"no case matches {args.only}")
    if args.list:
        for c in cases:
            print(f"{c.name:34} {c.group:8} {c.what}")
        return 0
    help_text = run_help()
    root = Path(tempfile.mkdtemp(prefix="faults-")) if args.keep is None else args.keep
    began = time.monotonic()
    rows: list[tuple[str, str, str, str]] = []
    failures: list[tuple[str, list[str], str]] = []
    for c in cases:
        missing = [flag for flag in c.needs if flag not in help_text]
        if missing:
            rows.append((c.name, c.expect.text(), f"needs {', '.join(missing)}", "SKIP"))
            print(f"{c.name}: SKIP (loadgen run --help lacks {', '.join(missing)})", flush=True)
            continue
        work = root / c.name
        if work.exists():
            shutil.rmtree(work)
        work.mkdir(parents=True)
        try:
            outcome = c.body(work)
        except Skip as exc:
            rows.append((c.name, c.expect.text(), str(exc), "SKIP"))
            continue
        problems = check(outcome, c.expect)
        verdict = "FAIL" if problems else "PASS"
        rows.append((c.name, c.expect.text(), got_text(outcome), verdict))
        if problems:
            failures.append((c.name, problems, outcome.note))
        print(f"{c.name}: {verdict} ({got_text(outcome)})", flush=True)
    total = time.monotonic() - began
    print()
    widths = [max(len(r[i]) for r in [*rows, ("case", "expected", "got", "")]) for i in range(3)]
    print(f"{'case':{widths[0]}}  {'expected':{widths[1]}}  {'got':{widths[2]}}  result")
    for name, expected, got, verdict in rows:
        print(f"{name:{widths[0]}}  {expected:{widths[1]}}  {got:{widths[2]}}  {verdict}")
    passed = sum(r[3] == "PASS" for r in rows)
    skipped = sum(r[3] == "SKIP" for r in rows)
    print(
        f"\n{passed} passed, {len(failures)} failed, {skipped} skipped in {total:.0f} s"
        + (f"; files in {root}" if args.keep else "")
    )
    for name, problems, note in failures:
        print(f"\n{name}:" + (f" ({note})" if note else ""))
        for problem in problems:
            print(f"  - {problem}")
    if args.keep is None:
        shutil.rmtree(root, ignore_errors=True)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
