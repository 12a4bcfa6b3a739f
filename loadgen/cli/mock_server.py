"""``loadgen mock-server``: the click command that configures and runs the mock server; its
options come from the mock's flag table (loadgen/mock/config.py)."""

from __future__ import annotations

import os

import click
import uvloop

from loadgen.cli.options import click_option, given_values
from loadgen.cli.streams import show_output
from loadgen.mock.app import serve
from loadgen.mock.config import MOCK_FLAGS, MockConfig
from loadgen.mock.recorder import TimingsSaveError
from loadgen.text.tokenizer import TokenizerLoadError

HELP = (
    "Run an OpenAI-compatible mock inference server (/v1/completions, /v1/chat/completions, "
    "/v1/embeddings, /pooling, /rerank, /v1/models, /tokenize, /detokenize, /health) with "
    "configurable latency, output length, error rate and start-up behaviour. GET /mock/stats "
    "counts the requests received, by method and path.\n\n"
    "Capacity on a 2-core machine: about 2800-3000 streamed requests/s (360k-380k events/s) with "
    "128-token streams; see docs/mock-server.md."
)


@click.pass_context
def serve_mock(ctx: click.Context, /, **values: object) -> None:
    """Run the mock server until SIGINT or SIGTERM."""
    show_output()  # its "listening on" line, which the process that started it reads
    # Options not given take MockConfig's defaults, the table's: --keepalive-timeout and
    # --http-threads then stay None, the personality's. Asked by source, not by value.
    config = MockConfig(**given_values(ctx, MOCK_FLAGS))
    if config.record_timings is not None:
        folder = config.record_timings.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise click.BadParameter(
                f"{folder} is not a writable directory", param_hint="--record-timings"
            )
    try:
        uvloop.run(serve(config))
    except (TokenizerLoadError, TimingsSaveError) as exc:
        raise click.ClickException(str(exc)) from None
    except OSError as exc:
        raise click.ClickException(f"cannot listen on {config.host}:{config.port}: {exc}") from None


mock_server_command = click.Command(
    "mock-server",
    params=[click_option(flag) for flag in MOCK_FLAGS],
    callback=serve_mock,
    help=HELP,
)
