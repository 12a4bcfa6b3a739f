"""Shared by the benchmark scripts: CPU accounting (processes, process trees, the rest of the
machine, sampled periodically in a thread), stopping the servers they start, and the tokenizer
directory every client is given."""

from __future__ import annotations

import datetime
import json
import os
import platform
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

import psutil

from loadgen.mock.process import EmbeddedMockServer, MockServerError

REPO = Path(__file__).resolve().parents[2]
TOKENIZER_JSON = REPO / "loadgen" / "data" / "tokenizer.json"
TOKENIZER_CONFIG = {
    "tokenizer_class": "PreTrainedTokenizerFast",
    "bos_token": "<|begin_of_text|>",
    "eos_token": "<|end_of_text|>",
}


def make_tokenizer_dir(path: Path) -> Path:
    """A directory HF transformers can load: loadgen's tokenizer.json plus a minimal config."""
    path.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(TOKENIZER_JSON, path / "tokenizer.json")
    (path / "tokenizer_config.json").write_text(json.dumps(TOKENIZER_CONFIG, indent=2))
    return path


def cpu_seconds(proc: psutil.Process) -> float:
    """User plus system CPU seconds of one process."""
    times = proc.cpu_times()
    return times.user + times.system


class ProcessTreeCpu:
    """CPU seconds of a process and its descendants; one that exited keeps its last value."""

    def __init__(self, pid: int) -> None:
        self.root = psutil.Process(pid)
        self.seen: dict[int, float] = {}  # pid -> latest user+system seconds

    def seconds(self) -> float:
        """The tree's CPU seconds so far."""
        try:
            procs = [self.root, *self.root.children(recursive=True)]
        except psutil.Error:
            procs = []
        for proc in procs:
            with suppress(psutil.Error):
                self.seen[proc.pid] = cpu_seconds(proc)
        return sum(self.seen.values())


_ME = psutil.Process()


def other_cpu_seconds(*accounted: float) -> float:
    """The machine's CPU seconds (hypervisor steal included) less ``accounted`` and this script."""
    m = psutil.cpu_times()
    machine = m.user + m.system + getattr(m, "nice", 0.0) + getattr(m, "steal", 0.0)
    return machine - sum(accounted) - cpu_seconds(_ME)


class PeriodicSampler:
    """Calls ``sample`` on entry, every ``period_s`` in a thread, and once more on exit."""

    def __init__(self, period_s: float, sample: Callable[[], None]) -> None:
        self.period_s = period_s
        self.sample = sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def __enter__(self) -> PeriodicSampler:
        self.sample()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self.sample()

    def _loop(self) -> None:
        while not self._stop.wait(self.period_s):
            self.sample()


def stop_process(proc: subprocess.Popen, timeout_s: float = 10.0) -> None:
    """Terminate a process, and kill it if it has not exited within ``timeout_s``."""
    proc.terminate()
    try:
        proc.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def loadgen_command() -> list[str]:
    """The `loadgen` console script of this interpreter's environment."""
    sibling = Path(sys.executable).parent / "loadgen"
    found = str(sibling) if sibling.exists() else shutil.which("loadgen")
    if found is None:
        raise SystemExit("the `loadgen` command was not found; install loadgen in this venv")
    return [found]


@contextmanager
def mock_server(
    stderr_path: Path, itl_ms: float = 0.0, extra_args: tuple[str, ...] = ()
) -> Iterator[tuple[str, psutil.Process]]:
    """Run `loadgen mock-server --port 0` in its own process; yield its URL and process."""
    server = EmbeddedMockServer(itl_ms=itl_ms, extra_args=extra_args, stderr_path=stderr_path)
    try:
        url = server.start()
    except MockServerError as exc:
        raise SystemExit(str(exc)) from None
    assert server.process is not None
    try:
        yield url, psutil.Process(server.process.pid)
    finally:
        server.stop(timeout_s=10)


def machine_line(title: str) -> str:
    """The first line every benchmark prints: what, when, and on which machine."""
    return (
        f"{title}, {datetime.datetime.now():%Y-%m-%d %H:%M}, {os.cpu_count()} CPUs "
        f"({platform.processor() or platform.machine()}), Python {platform.python_version()}"
    )
