"""The mock server in its own process on a free loopback port: for ``loadgen run --mock``,
``loadgen calibrate`` and the benchmark scripts."""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import IO

LISTENING = re.compile(r"listening on (http://\S+)")
PR_SET_PDEATHSIG = 1  # prctl(2): the signal a process gets when its parent dies


class MockServerError(RuntimeError):
    """The mock server did not come up."""


class EmbeddedMockServer:
    """Start ``loadgen mock-server --port 0`` and learn its URL from the line it prints.

    Its stderr goes to ``stderr_path`` (an unnamed temporary file by default), never to a pipe that
    nobody drains during a long run. ``own_session``: in a session of its own, out of the
    terminal's process group, so a Ctrl-C reaches only its caller (which stops it itself).
    """

    def __init__(
        self,
        ttft_ms: float = 0.0,
        itl_ms: float = 0.0,
        extra_args: tuple[str, ...] = (),
        stderr_path: Path | None = None,
        own_session: bool = False,
    ) -> None:
        self.args = [
            *(sys.executable, "-m", "loadgen.mock", "--host", "127.0.0.1", "--port", "0"),
            *("--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms)),
            *extra_args,
        ]
        self.stderr_path = stderr_path
        self.own_session = own_session
        # Without a path: a file with no name (unlinked at once), so that even a run killed
        # by SIGKILL leaves nothing behind on disk.
        self.stderr_file: IO[bytes] | None = None
        self.process: subprocess.Popen | None = None
        self.url = ""

    def start(self, timeout_s: float = 60.0) -> str:
        """Launch the server and return its base URL once it listens."""
        with contextlib.ExitStack() as stack:
            stderr: IO[bytes]
            if self.stderr_path is None:
                # Kept open for last_error(); closed with this object.
                self.stderr_file = stderr = tempfile.TemporaryFile(prefix="loadgen-mock-")  # noqa: SIM115
            else:
                stderr = stack.enter_context(self.stderr_path.open("wb"))
            self.process = subprocess.Popen(
                self.args,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                preexec_fn=_dies_with_parent if sys.platform.startswith("linux") else None,
                start_new_session=self.own_session,
            )
        assert self.process.stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(self.process.stdout, selectors.EVENT_READ)
            deadline = time.monotonic() + timeout_s
            while time.monotonic() < deadline and self.process.poll() is None:
                if selector.select(timeout=0.1):
                    match = LISTENING.search(self.process.stdout.readline())
                    if match:
                        self.url = match.group(1)
                        return self.url
        self.kill()
        error = self.last_error()
        raise MockServerError(f"the mock server did not start: {error}")

    def last_error(self) -> str:
        """The last non-empty line the server wrote to stderr."""
        if self.stderr_file is not None:
            # pread: the server shares this file's offset, which must not move.
            fd = self.stderr_file.fileno()
            text = os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")
        elif self.stderr_path is not None and self.stderr_path.exists():
            text = self.stderr_path.read_text(errors="replace")
        else:
            return "no output"
        lines = [ln.strip() for ln in text.splitlines()]
        lines = [ln for ln in lines if ln]
        return lines[-1] if lines else "no output"

    def stop(self, timeout_s: float = 5.0) -> int | None:
        """Stop the server (SIGTERM, then SIGKILL after ``timeout_s``); return its exit code."""
        if self.process is None:
            return None
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.kill()
        return self.process.returncode

    def kill(self) -> None:
        """End the server process at once, if it runs."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()


def _dies_with_parent() -> None:
    """In the mock's process before it starts: SIGTERM when the process that started it dies,
    even by SIGKILL (Linux's parent-death signal), so a killed run leaves no server behind."""
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
