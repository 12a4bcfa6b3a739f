"""Headers and proxy resolution used by every request to the server; no sockets."""

from __future__ import annotations

import pytest

from loadgen.readiness import auth_headers, proxy_for


def test_api_key_becomes_a_bearer_header_that_header_flags_override(monkeypatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    assert auth_headers({}) == {"Authorization": "Bearer sk-test"}
    assert auth_headers({"Authorization": "Bearer other", "x-a": "1"}) == {
        "Authorization": "Bearer other",
        "x-a": "1",
    }
    monkeypatch.delenv("OPENAI_API_KEY")
    assert auth_headers({"x-a": "1"}) == {"x-a": "1"}


@pytest.fixture
def no_proxy_env(monkeypatch):
    for name in ("http_proxy", "https_proxy", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    return monkeypatch


def test_proxy_from_the_environment_for_the_url_scheme(no_proxy_env) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert proxy_for("http://server.example:8000/v1/completions") == "http://proxy.example:3128"
    assert proxy_for("https://server.example/v1/completions") is None


def test_no_proxy_bypasses_it(no_proxy_env) -> None:
    no_proxy_env.setenv("HTTP_PROXY", "http://proxy.example:3128")
    no_proxy_env.setenv("NO_PROXY", "server.example")
    assert proxy_for("http://server.example:8000/v1/completions") is None


def test_no_proxy_configured(no_proxy_env) -> None:
    assert proxy_for("http://server.example:8000/v1/completions") is None
