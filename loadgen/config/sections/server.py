"""`loadgen run`'s server section: where requests go, how to reach the server and wait for it,
its tokenizer, and the embedded mock (--mock) that stands in for it.
"""

from __future__ import annotations

import dataclasses
import urllib.parse

from loadgen.backends import POOLING_BACKENDS
from loadgen.config.flag_terms import LOADGEN
from loadgen.config.parsers import check_tokenizer_mode, parse_headers
from loadgen.config.upstream import UPSTREAM_BACKENDS
from loadgen.flag import flag

DEFAULT_ENDPOINT = "/v1/completions"  # upstream's, for every backend


def parse_telemetry_urls(items: tuple[str, ...]) -> tuple[str, ...]:
    """``--telemetry-url URL ...``: each an http(s) URL with a host; ValueError naming a bad one."""
    for item in items:
        parts = urllib.parse.urlsplit(item)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(
                f"'{item}': use an http:// or https:// URL, e.g. http://gpu1:9400/metrics"
            )
    return tuple(items)


@dataclasses.dataclass(frozen=True, kw_only=True)
class Server:
    """The server: its address, backend, model and tokenizer, and the waits and timeouts."""

    # --- the server ---
    backend: str = flag(
        "--backend",
        default="openai",
        choices=UPSTREAM_BACKENDS,
        help="Request format: openai and vllm (completions), openai-chat, openai-audio "
        "(transcriptions, translations), and the pooling backends (embeddings, pooling, "
        "rerank).",
    )
    base_url: str | None = flag("--base-url", help="Server base URL; overrides --host/--port.")
    host: str = flag("--host", default="127.0.0.1")
    port: int = flag("--port", int, 8000)
    endpoint: str = flag(
        "--endpoint",
        default=DEFAULT_ENDPOINT,
        help="API path. Without it, the backend's own: /v1/completions, or for openai-chat "
        "/v1/chat/completions, embeddings /v1/embeddings, ...",
    )
    insecure: bool = flag(
        "--insecure", bool, False, help="Do not check the server's TLS certificate."
    )
    headers: dict[str, str] = flag(
        "--header",
        default=(),
        field="headers",
        parse=parse_headers,
        multiple=True,
        nargs="*",
        metavar="KEY=VALUE",
        help="Extra HTTP header on every request; several values may follow one flag.",
    )
    model: str | None = flag(
        "--model", help="Model name; default: the first model of the server's /v1/models."
    )
    served_model_name: str | None = flag(
        "--served-model-name", help="The model field sent (default --model)."
    )
    # --- the tokenizer ---
    tokenizer: str | None = flag(
        "--tokenizer",
        help="tokenizer.json, a directory holding one, or a Hugging Face id (default --model).",
    )
    tokenizer_mode: str = flag(
        "--tokenizer-mode",
        default="auto",
        check=check_tokenizer_mode,
        help="auto or hf: a Hugging Face tokenizer.json (other upstream modes are not supported "
        "yet).",
    )
    trust_remote_code: bool = flag(
        "--trust-remote-code",
        bool,
        False,
        help="Accepted for upstream's scripts: loadgen reads tokenizer.json only and runs no "
        "tokenizer code, so there is nothing to trust.",
    )
    skip_tokenizer_init: bool = flag(
        "--skip-tokenizer-init",
        bool,
        False,
        help="No client-side tokenizer: the dataset is built with the server's /tokenize, and "
        "tokenizer_id, token throughputs and the TTFT/TPOT/ITL sections go, as upstream.",
    )
    # --- what loadgen asks of the server beside the run ---
    profile: bool = flag(
        "--profile",
        bool,
        False,
        help="POST /start_profile before the run and /stop_profile after it (the server must "
        "have profiling enabled).",
    )
    # --- the server's metrics and other exporters, scraped during the run ---
    server_metrics: bool = flag(
        "--server-metrics",
        bool,
        True,
        secondary="--no-server-metrics",
        group=LOADGEN,
        help="Scrape the server's /metrics during the run into the records file (on when "
        "/metrics answers before the run; docs/servers.md names the series).",
    )
    server_metrics_interval: float = flag(
        "--server-metrics-interval",
        float,
        1.0,
        minimum=0,
        min_open=True,
        range_words="{name} must be > 0, got {value:g}",
        group=LOADGEN,
        help="Seconds between two scrapes of /metrics and of each --telemetry-url.",
    )
    telemetry_urls: tuple[str, ...] = flag(
        "--telemetry-url",
        default=(),
        field="telemetry_urls",
        parse=parse_telemetry_urls,
        multiple=True,
        metavar="URL",
        group=LOADGEN,
        help="Another Prometheus exporter scraped as /metrics is (a DCGM exporter's "
        "http://gpu-host:9400/metrics, a node exporter); may be repeated.",
    )
    # --- waiting for the server ---
    ready_check_timeout_sec: int = flag(
        "--ready-check-timeout-sec",
        int,
        0,
        minimum=0,
        range_words="{name} must be >= 0, got {value:g}",
        help="Seconds to wait for the server: model discovery, the server tokenizer and a "
        "first request like the run's are retried until they succeed. 0: one attempt each, "
        "and no test request.",
    )
    ready_check_interval_sec: float = flag(
        "--ready-check-interval-sec",
        float,
        5.0,
        minimum=0,
        min_open=True,
        range_words="{name} must be > 0, got {value:g}",
        group=LOADGEN,
        help="Seconds between two tries while waiting for the server.",
    )
    server_tokenizer_timeout_sec: float = flag(
        "--server-tokenizer-timeout-sec",
        float,
        300.0,
        minimum=0,
        min_open=True,
        range_words="{name} must be > 0, got {value:g}",
        help="Seconds the dataset may take to build through the server's /tokenize and "
        "/detokenize (when no local tokenizer loads) before the run stops with exit 1; also "
        "bounds the alignment of random prompts to the server's tokenizer.",
    )
    # --- timeouts ---
    request_timeout: float | None = flag(
        "--request-timeout",
        float,
        None,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds a request may take from sent to its last byte before it fails with "
        "'request timeout' (default: no limit). Warm-ups and probes obey it too.",
    )
    idle_timeout: float = flag(
        "--idle-timeout",
        float,
        300.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds an open request may go without a byte from the server before it fails "
        "with 'idle timeout' (a server that stalls after its headers or mid-stream).",
    )
    connect_timeout: float = flag(
        "--connect-timeout",
        float,
        30.0,
        group=LOADGEN,
        minimum=0,
        min_open=True,
        help="Seconds opening a connection (TCP and TLS) may take before its request fails.",
    )
    # --- the embedded mock server ---
    mock: bool = flag(
        "--mock",
        bool,
        False,
        group=LOADGEN,
        help="Start the embedded mock server on a free loopback port and run against it.",
    )
    mock_ttft_ms: float = flag(
        "--mock-ttft-ms",
        float,
        0.0,
        group=LOADGEN,
        help="With --mock: the mock's time to first token.",
    )
    mock_itl_ms: float = flag(
        "--mock-itl-ms",
        float,
        0.0,
        group=LOADGEN,
        help="With --mock: the mock's gap between tokens.",
    )
    mock_prefill_us_per_token: float = flag(
        "--mock-prefill-us-per-token",
        float,
        0.0,
        group=LOADGEN,
        minimum=0,
        help="With --mock: microseconds of prefill per prompt token not in the mock's prefix "
        "cache, added to its time to first token (multi-turn runs then show the cache's "
        "effect by turn).",
    )

    @property
    def pooling(self) -> bool:
        """Whether the backend is a pooling one (embeddings, pooling): E2EL only, no output."""
        return self.backend in POOLING_BACKENDS

    @property
    def api_url(self) -> str:
        """The URL every request is posted to."""
        return f"{self.server_url}{self.endpoint}"

    @property
    def server_url(self) -> str:
        """The server's base URL (``--base-url``, or built from ``--host`` and ``--port``)."""
        if self.base_url is not None:
            return self.base_url
        host = f"[{self.host}]" if ":" in self.host and not self.host.startswith("[") else self.host
        return f"http://{host}:{self.port}"
