"""Helpers the tests import (fixtures live in conftest.py): a free port, the real CLI in its own
process or in this one (``cli``, ``refusal``, ``run_in_process``), the result JSON it wrote,
the mock server as a process, and a run against one; a server of a test's own; checks run as
another local user; and time bounds measured on this machine, now (``startup_s``,
``startups``, ``slowdown``, ``hang_guard``): a test never bounds wall-clock time with a fixed
number of seconds, which a busy machine breaks."""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import json
import os
import pickle
import pkgutil
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from loadgen.mock.process import EmbeddedMockServer
from loadgen.server.client import ServerClient
from loadgen.server.tokenizer import ServerTokenizer

DATA = Path(__file__).parent / "data"
ROOT = Path(__file__).resolve().parents[1]  # the repository, wherever a test file lies in tests/


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on (free when asked; bind it soon)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the real CLI ---------------------------------------------------------------------------


def loadgen(
    *args: str, timeout: float = 60, env: Mapping[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """Run ``loadgen run ARGS`` (the real CLI) in its own process and wait for it: at most
    ``hang_guard(timeout)``, ``timeout`` being seconds with room to spare on a quiet machine."""
    return subprocess.run(
        [sys.executable, "-m", "loadgen", "run", *args],
        capture_output=True,
        text=True,
        timeout=hang_guard(timeout),
        env=None if env is None else dict(env),
    )


@dataclass
class InProcess:
    """What ``cli`` returns: the fields of a finished ``subprocess.CompletedProcess`` that the
    tests read, so that a check reads the same either way."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, env: Mapping[str, str] | None = None, merged: bool = False) -> InProcess:
    """``loadgen ARGS`` run in this process by click's test runner (``env``: variables set for
    the call): its exit code, stdout and stderr (``merged``: stderr in stdout, interleaved as a
    log shows them, and no stderr). For what ends before a run starts (a refusal, ``--help``)
    and for ``loadgen report`` and ``compare``, which start nothing: no interpreter to start,
    no imports to repeat. A run, a signal or a terminal stays with ``loadgen``."""
    from click.testing import CliRunner

    from loadgen.cli import cli as loadgen_cli

    result = CliRunner().invoke(loadgen_cli, list(args), env=env, catch_exceptions=False)
    if merged:
        return InProcess(list(args), result.exit_code, result.output, "")
    return InProcess(list(args), result.exit_code, result.stdout, result.stderr)


def refusal(*args: str, env: Mapping[str, str] | None = None) -> InProcess:
    """``loadgen run ARGS`` in this process (``cli``), for a run refused before it starts."""
    return cli("run", *args, env=env)


def run_in_process(*args: str, env: Mapping[str, str] | None = None) -> InProcess:
    """``loadgen run ARGS`` in this process (``cli``): a real run, its workers and its server
    real processes, whose coordinator is this one (no interpreter to start, no imports to
    repeat), and whose ``--mock`` server is one the session keeps (``shared_mock_servers``).
    For a test of what a run sends and measures (its result JSON, its notes); the CLI's own
    process (exit codes of real runs, signals, stdout as a terminal or a pipe gets it, ``-q``)
    is ``loadgen``'s. ``env``: variables set for the run (not those a module reads as it is
    imported: HF_HUB_OFFLINE and the like need ``loadgen``)."""
    with shared_mock_servers():
        return cli("run", *args, env=env)


# Mock server processes kept for the session, by command line (``shared_mock_servers``).
_SHARED_MOCKS: dict[tuple[str, ...], EmbeddedMockServer] = {}


@contextmanager
def shared_mock_servers() -> Iterator[None]:
    """For the block, a ``--mock`` run in this process gets the session's mock server process
    started with the same command line (``--mock-ttft-ms`` and the like), started by the first
    run that asks and kept until the session ends (``stop_shared_mock_servers``), instead of a
    server of its own: the same server, less its start. Its counters are the session's; a run
    reads the server's /metrics before and after, and a test that counts requests starts its
    own (``mock_server``)."""
    real_start, real_stop = EmbeddedMockServer.start, EmbeddedMockServer.stop

    def start(self: EmbeddedMockServer, timeout_s: float = 60.0) -> str:
        key = tuple(self.args)
        shared = _SHARED_MOCKS.get(key)
        if shared is None or shared.process is None or shared.process.poll() is not None:
            shared = EmbeddedMockServer()
            shared.args = list(self.args)
            real_start(shared, timeout_s)
            _SHARED_MOCKS[key] = shared
        self.url = shared.url
        return self.url

    def stop(self: EmbeddedMockServer, timeout_s: float = 5.0) -> int | None:
        return None  # the session's server: stopped at the session's end

    EmbeddedMockServer.start, EmbeddedMockServer.stop = start, stop  # type: ignore[method-assign]
    try:
        yield
    finally:
        EmbeddedMockServer.start, EmbeddedMockServer.stop = real_start, real_stop  # type: ignore[method-assign]


def stop_shared_mock_servers() -> None:
    """Stop the mock servers ``shared_mock_servers`` kept (at the session's end)."""
    while _SHARED_MOCKS:
        _, server = _SHARED_MOCKS.popitem()
        server.stop()


def start_loadgen(*args: str, env: Mapping[str, str] | None = None) -> subprocess.Popen[str]:
    """Start ``loadgen run ARGS`` in its own process, stdout and stderr piped; do not wait."""
    return subprocess.Popen(
        [sys.executable, "-m", "loadgen", "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=None if env is None else dict(env),
    )


def wait_for_t0(proc: subprocess.Popen[str], timeout: float | None = None) -> None:
    """Block until the run has started: the progress bar appears on stderr at t0 (by default
    within ``hang_guard(30)``: it only catches a run that never starts)."""
    timeout = hang_guard(30) if timeout is None else timeout
    assert proc.stderr is not None
    fd = proc.stderr.fileno()
    seen = b""
    deadline = time.monotonic() + timeout
    while b"%|" not in seen:
        assert time.monotonic() < deadline, f"the run did not start: {seen[-300:]!r}"
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            chunk = os.read(fd, 4096)
            assert chunk, f"loadgen exited before t0: {seen[-300:]!r}"
            seen += chunk


def only_json_path(directory: Path) -> Path:
    """The one JSON file in ``directory`` (asserts there is exactly one)."""
    files = list(directory.glob("*.json"))
    assert len(files) == 1, files
    return files[0]


def only_json(directory: Path) -> dict:
    """The content of the one JSON file in ``directory``: the result a run wrote there."""
    return json.loads(only_json_path(directory).read_text())


# --- time bounds from this machine, now -------------------------------------------------------

# A trivial real run: the coordinator, a worker, the mock, one request, and the exit.
TRIVIAL_RUN = ("--mock", "--num-prompts", "1", "--random-input-len", "8", "--random-output-len",
               "2", "--disable-tqdm", "-q")  # fmt: skip


@functools.cache
def _calibration() -> tuple[float, float]:
    """The wall-clock and CPU seconds of a trivial real CLI run (``TRIVIAL_RUN``), the median of
    three, measured once per test session (the first test that asks pays for it)."""
    runs = []
    for _ in range(3):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, "-m", "loadgen", "run", *TRIVIAL_RUN],
            capture_output=True,
            text=True,
        )  # no timeout: this is what every other bound is measured against
        wall = time.perf_counter() - started
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        assert proc.returncode == 0, f"the calibration run failed: {proc.stderr[-500:]}"
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        runs.append((wall, cpu))
    runs.sort()
    return runs[1]


def startup_s() -> float:
    """Seconds a trivial real CLI run takes on this machine now (Python, the imports, a worker
    and the mock started, one request, the exit): the unit of a bound on anything that starts
    the CLI. Measured once per session, cached."""
    return _calibration()[0]


def startups(n: float) -> float:
    """A bound for a step that costs at most ``n`` start-ups of the CLI on this machine now."""
    return n * startup_s()


def slowdown() -> float:
    """How much longer than its own CPU time the trivial run took (at least 1): on a quiet
    machine about 1, beside busy loops that hold every core about 1 + their number per core.
    It stretches a wait that was sized on a quiet machine."""
    wall, cpu = _calibration()
    return max(1.0, wall / cpu) if cpu > 0 else 1.0


def hang_guard(quiet_s: float) -> float:
    """A bound that only catches a hang: ``quiet_s`` (a wait with room to spare on a quiet
    machine) stretched by ``slowdown()``, plus a start-up. Never a claim about speed."""
    return quiet_s * slowdown() + startup_s()


# --- the mock server as a process -------------------------------------------------------------


def mock_stats(url: str) -> dict[str, Any]:
    """The mock's own counters (``GET /mock/stats``)."""
    with urllib.request.urlopen(f"{url}/mock/stats", timeout=10) as response:
        return json.load(response)


@contextmanager
def mock_server(*mock_args: str, itl_ms: float = 0.0) -> Iterator[str]:
    """A mock server process (``loadgen.mock MOCK_ARGS``) for the block; yields its base URL
    once it listens, and stops it after."""
    mock = EmbeddedMockServer(itl_ms=itl_ms, extra_args=mock_args)
    url = mock.start()
    try:
        yield url
    finally:
        mock.stop()


@dataclass
class MockRun:
    proc: subprocess.CompletedProcess[str] | InProcess
    stats: dict[str, Any]  # the mock's /mock/stats after the run
    launched: float  # time.perf_counter() just before loadgen was started
    ended: float  # time.perf_counter() just after it ended


def run_against_mock(
    *args: str,
    mock_args: tuple[str, ...] | list[str] = (),
    itl_ms: float = 0.0,
    timeout: float = 120,
    env: Mapping[str, str] | None = None,
    in_process: bool = True,
) -> MockRun:
    """``loadgen run --base-url URL ARGS`` against a fresh mock server process started with
    ``mock_args``; the finished run and what the mock counted. The run's coordinator is this
    process (``run_in_process``) unless ``in_process`` is False or ``env`` is given: then it is
    the CLI in its own process (``loadgen``), bounded by ``timeout``."""
    with mock_server(*mock_args, itl_ms=itl_ms) as url:
        launched = time.perf_counter()
        if in_process and env is None:
            proc: subprocess.CompletedProcess[str] | InProcess = run_in_process(
                "--base-url", url, *args
            )
        else:
            proc = loadgen("--base-url", url, *args, timeout=timeout, env=env)
        ended = time.perf_counter()
        stats = mock_stats(url)
    return MockRun(proc, stats, launched, ended)


# --- the mock server as a raw process, for the tests of the mock itself -----------------------

LISTENING = re.compile(r"loadgen mock-server listening on http://127\.0\.0\.1:(\d+)\n")


@dataclass
class MockProcess:
    proc: subprocess.Popen[str]
    url: str
    stderr: Path


def spawn_mock(*args: str, stderr: Path) -> subprocess.Popen[str]:
    """``loadgen.mock ARGS`` on 127.0.0.1, stdout piped, stderr to a file; do not wait."""
    command = [sys.executable, "-m", "loadgen.mock", "--host", "127.0.0.1", *args]
    with stderr.open("w") as err:
        return subprocess.Popen(command, stdout=subprocess.PIPE, stderr=err, text=True)


def mock_listening_port(proc: subprocess.Popen[str], timeout: float = 20.0) -> int:
    """The port from the mock's first line, "loadgen mock-server listening on ..." (within
    ``hang_guard(timeout)``)."""
    assert proc.stdout is not None
    ready, _, _ = select.select([proc.stdout], [], [], hang_guard(timeout))
    assert ready, "the server printed no 'listening on' line in time"
    line = proc.stdout.readline()
    match = LISTENING.fullmatch(line)
    assert match, f"unexpected first line {line!r}"
    return int(match.group(1))


def stop_process(proc: subprocess.Popen[str], sig: int = signal.SIGTERM) -> int:
    """Send ``sig`` and return the exit code (killed, and the timeout raised, after
    ``hang_guard(10)``)."""
    proc.send_signal(sig)
    try:
        return proc.wait(timeout=hang_guard(10))
    except subprocess.TimeoutExpired:
        proc.kill()
        raise


def start_mock(tmp_path: Path, *args: str) -> MockProcess:
    """A mock process on a port of its choosing, its stderr in ``tmp_path``; once it listens."""
    stderr = tmp_path / "stderr.txt"
    proc = spawn_mock("--port", "0", *args, stderr=stderr)
    try:
        port = mock_listening_port(proc)
    except BaseException:
        proc.kill()
        raise
    return MockProcess(proc, f"http://127.0.0.1:{port}", stderr)


# --- the server tokenizer -----------------------------------------------------------------------


async def server_tokenizer_round_trip(
    server_url: str,
) -> tuple[ServerTokenizer, list[list[int]], list[str]]:
    """Connect a ServerTokenizer to ``server_url``, encode three texts and decode them back."""
    client = ServerClient(server_url, {})
    try:
        tokenizer = await ServerTokenizer.connect(client, "loadgen-mock", 10, 0.1)
        texts = ["Hello world, this is a test.", "Another prompt", "x" * 500]
        ids = await tokenizer.aencode_batch(texts)
        # The blocking calls are for threads; on the loop they refuse rather than deadlock.
        with pytest.raises(RuntimeError, match="block the event loop"):
            tokenizer.encode_batch(texts)
        decoded = await asyncio.to_thread(tokenizer.decode_batch, ids)
        return tokenizer, ids, decoded
    finally:
        await client.close()


# --- configs --------------------------------------------------------------------------------


def config_given(**fields: Any):  # -> loadgen.config.RunConfig
    """A RunConfig as `loadgen run` builds it when the flag of each field named was given on
    the command line (``RunConfig(...)`` alone has none given, so it warns about none)."""
    from loadgen.config import RUN_FLAGS, RunConfig

    flag_of = {flag.field: flag.name for flag in RUN_FLAGS}
    return RunConfig(**fields, given=frozenset(flag_of[name] for name in fields))


# --- a misbehaving server of a test's own, in a thread ----------------------------------------


@contextmanager
def asyncio_server(
    serve: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
) -> Iterator[int]:
    """An asyncio server on 127.0.0.1 that runs ``serve`` for each connection, in a thread of
    its own; yields its port, and stops it after, its open connections cancelled."""
    loop = asyncio.new_event_loop()
    port = free_port()
    server = loop.run_until_complete(asyncio.start_server(serve, "127.0.0.1", port))
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def shut_down() -> None:
        server.close()
        for task in asyncio.all_tasks():
            if task is not asyncio.current_task():
                task.cancel()

    try:
        yield port
    finally:
        asyncio.run_coroutine_threadsafe(shut_down(), loop).result(timeout=5)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)


# --- another local user ----------------------------------------------------------------------

NOBODY = 65534  # the uid and gid of `nobody`: another local user, for tests run as root


@contextmanager
def locked_directory(tmp_path: Path) -> Iterator[Path]:
    """A 0500 directory that nobody but root can write into, and a way to be that somebody else:
    run as root, it belongs to ``NOBODY`` (who can reach it but not write into it), so the test
    runs its check through ``as_nobody``; run as another user, it is that user's own."""
    if os.geteuid() == 0:
        parent = Path(tempfile.mkdtemp(prefix="loadgen-test-", dir="/tmp"))
        parent.chmod(0o755)  # tmp_path's parents are 0700: the other user could not reach it
        locked = parent / "locked"
        locked.mkdir()
        os.chown(locked, NOBODY, NOBODY)
    else:
        parent, locked = tmp_path, tmp_path / "locked"
        locked.mkdir()
    locked.chmod(0o500)
    try:
        yield locked
    finally:
        locked.chmod(0o700)
        if parent != tmp_path:
            shutil.rmtree(parent)


def as_nobody(check: Callable[[], Any]) -> Any:
    """``check()`` in a forked child as ``NOBODY`` when run as root (so that permissions bind),
    else here; its (picklable) result. The child has this process's modules: it execs nothing."""
    if os.geteuid() != 0:
        return check()
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        code = 1
        try:
            os.close(read_end)
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            with os.fdopen(write_end, "wb") as out:
                pickle.dump(check(), out)
            code = 0
        finally:
            os._exit(code)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as pipe:
        data = pipe.read()
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0 and data, "the check failed as the other user"
    return pickle.loads(data)


@functools.cache
def import_all_of_loadgen() -> None:
    """Import every module of loadgen and workers here, before a fork drops to ``NOBODY``: that
    user may not read this Python's standard library (under root's home), and an extension
    module half-loaded there crashed the child (orjson: SIGSEGV) when no earlier test of the
    session had imported it."""
    import loadgen
    import workers

    for package in (loadgen, workers):
        for module in pkgutil.walk_packages(package.__path__, f"{package.__name__}."):
            if not module.name.endswith("__main__"):
                importlib.import_module(module.name)


def cli_as_nobody(*args: str) -> tuple[int, str]:
    """The real CLI, in process, as ``NOBODY`` when run as root (``as_nobody``): its exit code
    and what it wrote to stderr. For refusals that come before anything starts."""
    import_all_of_loadgen()

    def invoke() -> tuple[int, str]:
        from click.testing import CliRunner

        from loadgen.cli import cli

        result = CliRunner().invoke(cli, list(args))
        return result.exit_code, result.stderr

    return as_nobody(invoke)


def write_hub_copy(folder: Path, split: str, rows: list[dict], images: dict[str, Any]) -> Path:
    """A local parquet copy of a hub dataset (the [hf] extra's ``datasets`` writes it), as
    scripts/bench/mm_hub_copies.py writes the parity benchmark's: one writer for both."""
    path = Path(__file__).resolve().parents[1] / "scripts" / "bench" / "mm_hub_copies.py"
    spec = importlib.util.spec_from_file_location("mm_hub_copies", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.write_hub_copy(folder, split, rows, images)
