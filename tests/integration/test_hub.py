"""loadgen/text/hub.py's probe: a hub (or the proxy to it) that accepts a connection is
reachable; one that refuses is not, and the reason names where it tried."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest
from huggingface_hub import constants

from loadgen.text import hub


@pytest.fixture(autouse=True)
def fresh_probe(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    for name in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "no_proxy", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
    hub.unreachable.cache_clear()
    yield
    hub.unreachable.cache_clear()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def test_a_listening_hub_is_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        monkeypatch.setattr(constants, "ENDPOINT", f"http://127.0.0.1:{listener.getsockname()[1]}")
        assert hub.unreachable() is None


def test_a_refusing_hub_is_not_and_says_where(monkeypatch: pytest.MonkeyPatch) -> None:
    port = closed_port()
    monkeypatch.setattr(constants, "ENDPOINT", f"https://127.0.0.1:{port}")
    assert hub.unreachable() == f"127.0.0.1:{port}: Connection refused"


def test_a_proxy_is_probed_instead_of_the_hub(monkeypatch: pytest.MonkeyPatch) -> None:
    """Behind a proxy the hub's own address may not resolve at all: the proxy is what answers."""
    monkeypatch.setattr(constants, "ENDPOINT", "https://hub.invalid")
    with socket.create_server(("127.0.0.1", 0)) as proxy:
        monkeypatch.setenv("https_proxy", f"http://127.0.0.1:{proxy.getsockname()[1]}")
        assert hub.unreachable() is None
    hub.unreachable.cache_clear()
    port = closed_port()
    monkeypatch.setenv("https_proxy", f"127.0.0.1:{port}")  # no scheme, as some set it
    assert hub.unreachable() == f"127.0.0.1:{port}: Connection refused"
