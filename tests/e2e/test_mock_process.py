"""The mock server as a child process: URL discovery, clean stop, a one-line start failure."""

from __future__ import annotations

import urllib.request

import pytest

from loadgen.mock.process import EmbeddedMockServer, MockServerError


def test_starts_answers_and_stops_cleanly_without_leaving_its_stderr_file() -> None:
    server = EmbeddedMockServer()
    url = server.start()
    assert url.startswith("http://127.0.0.1:")
    with urllib.request.urlopen(url + "/health", timeout=10) as response:
        assert response.status == 200
    stderr = server.stderr_path
    assert stderr is not None and stderr.exists()
    assert server.stop() == 0
    assert not stderr.exists()


def test_a_server_that_cannot_start_is_one_error_naming_the_cause() -> None:
    server = EmbeddedMockServer(extra_args=("--tokenizer", "/no/such/tokenizer"))
    with pytest.raises(MockServerError, match=r"did not start: .*no/such/tokenizer") as info:
        server.start()
    assert "\n" not in str(info.value)
    assert server.stderr_path is not None and not server.stderr_path.exists()
