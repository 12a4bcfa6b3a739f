"""The mock server as a child process: URL discovery, clean stop, a one-line start failure."""

from __future__ import annotations

import os
import urllib.request

import pytest

from loadgen.mock.process import EmbeddedMockServer, MockServerError


def test_starts_answers_and_stops_cleanly_with_a_stderr_file_that_has_no_name() -> None:
    server = EmbeddedMockServer()
    url = server.start()
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url + "/health", timeout=10) as response:
        assert response.status == 200
    # Unlinked from the start: a run killed by SIGKILL leaves no file behind.
    assert server.stderr_path is None and server.stderr_file is not None
    assert os.fstat(server.stderr_file.fileno()).st_nlink == 0
    assert server.stop() == 0


def test_a_server_that_cannot_start_is_one_error_naming_the_cause() -> None:
    server = EmbeddedMockServer(extra_args=("--tokenizer", "/no/such/tokenizer"))
    with pytest.raises(MockServerError, match=r"did not start: .*no/such/tokenizer") as info:
        server.start()
    assert "\n" not in str(info.value)
    assert server.stderr_path is None  # nothing was written on disk
