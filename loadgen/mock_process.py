"""The embedded mock server of ``loadgen run --mock``: its own process on a free loopback port."""

from __future__ import annotations

import re
import selectors
import subprocess
import sys
import time

LISTENING = re.compile(r"listening on (http://\S+)")


class MockServerError(RuntimeError):
    """The mock server did not come up."""


class EmbeddedMockServer:
    """Start ``loadgen mock-server --port 0`` and learn its URL from the line it prints."""

    def __init__(
        self, ttft_ms: float = 0.0, itl_ms: float = 0.0, extra_args: tuple[str, ...] = ()
    ) -> None:
        self.args = [
            sys.executable,
            "-m",
            "loadgen.mock_server",
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--ttft-ms",
            str(ttft_ms),
            "--itl-ms",
            str(itl_ms),
            *extra_args,
        ]
        self.process: subprocess.Popen | None = None

    def start(self, timeout_s: float = 60.0) -> str:
        """Launch the server and return its base URL once it listens."""
        self.process = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert self.process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(self.process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if not selector.select(timeout=0.1):
                if self.process.poll() is not None:
                    break
                continue
            line = self.process.stdout.readline()
            if not line:
                break
            if match := LISTENING.search(line):
                selector.close()
                return match.group(1)
        selector.close()
        stderr = ""
        if self.process.poll() is not None and self.process.stderr is not None:
            stderr = self.process.stderr.read().strip().splitlines()[-1:] or [""]
            stderr = f": {stderr[0]}"
        self.stop()
        raise MockServerError(f"the embedded mock server did not start{stderr}")

    def stop(self) -> None:
        """Stop the server process."""
        if self.process is None or self.process.poll() is not None:
            return
        self.process.terminate()
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
