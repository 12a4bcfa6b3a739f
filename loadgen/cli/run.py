"""``loadgen run``: a drop-in for `vllm bench serve`, its options made from the flag table."""

from __future__ import annotations

import dataclasses
import sys
import uuid

import click

from loadgen.cli.options import click_option, given, given_values
from loadgen.cli.streams import SurvivingStdout, show_output
from loadgen.cli.vllm_compat import VllmCompatibleCommand
from loadgen.config import RUN_FLAGS, ConfigError, InputError, RunConfig
from loadgen.fleet.fanout import FanoutError
from loadgen.mock.process import MockServerError
from loadgen.records.redact import redact_text
from loadgen.report.summary import table_and_verdict
from loadgen.server.errors import ServerError
from loadgen.session.campaign import is_campaign
from loadgen.session.campaign_run import run_campaign
from loadgen.session.lifecycle import RunFailed
from loadgen.session.runner import run
from loadgen.terminal import printable
from loadgen.text.chat_template import ChatTemplateError
from loadgen.text.tokenizer import TokenizerLoadError

MOCK_REFUSES = ("--base-url", "--host", "--port")  # --mock starts a server of its own
MOCK_ONLY = ("--mock-ttft-ms", "--mock-itl-ms", "--mock-prefill-us-per-token")


def mock_flags_conflict(mock: bool, flags_given: frozenset[str]) -> str | None:
    """Why the flags given clash with --mock given or not (None when they do not)."""
    if mock:
        clash = next((flag for flag in MOCK_REFUSES if flag in flags_given), None)
        return None if clash is None else f"--mock starts its own server; drop {clash}"
    clash = next((flag for flag in MOCK_ONLY if flag in flags_given), None)
    return None if clash is None else f"{clash} sets the embedded mock server: add --mock"


@click.pass_context
def run_benchmark(ctx: click.Context, /, **values: object) -> None:
    """Build the RunConfig from the options given, run it, and exit with its code."""
    show_output()
    flags_given = given(ctx, RUN_FLAGS)
    if conflict := mock_flags_conflict(bool(values["mock"]), flags_given):
        raise click.UsageError(conflict)
    config = RunConfig(**given_values(ctx, RUN_FLAGS), given=flags_given)
    if config.request_id_prefix is None:
        config = dataclasses.replace(config, request_id_prefix=f"bench-{uuid.uuid4().hex[:8]}-")
    if not isinstance(sys.stdout, SurvivingStdout):
        sys.stdout = SurvivingStdout(sys.stdout)  # | tee killed by Ctrl-C loses no result
    if config.dry_run and is_campaign(config):
        raise click.UsageError(
            "--dry-run plans one run: no lists in --max-concurrency or --request-rate, no "
            "--num-runs, --steady-state, --slo or --search"
        )
    if config.quiet:
        config = dataclasses.replace(config, disable_tqdm=True)
        # Only the report's table and verdict, rendered from its summary (a campaign's table
        # and SLO verdict, its TABLE lines), and what goes to stderr (the breached gates);
        # errors are click's, on stderr too.
        show_output(quiet=table_and_verdict)
    try:
        code = run_campaign(config) if is_campaign(config) else run(config)
    except ConfigError as exc:
        raise click.UsageError(redact_text(str(exc))) from None
    except (
        TokenizerLoadError,
        ChatTemplateError,
        InputError,
        ServerError,
        FanoutError,
        MockServerError,
    ) as exc:
        _fail(str(exc), getattr(exc, "exit_code", 1))  # a FanoutError's stop signal: 130/143
    except RunFailed as exc:
        _fail(str(exc), exc.exit_code)
    sys.exit(code)


def _fail(message: str, exit_code: int = 1) -> None:
    click.echo(f"error: {printable(redact_text(message))}", err=True)  # no password, no escapes
    sys.exit(exit_code)


run_command = VllmCompatibleCommand(
    "run",
    params=[click_option(flag) for flag in RUN_FLAGS],
    callback=run_benchmark,
    help="Benchmark a server; flags, defaults, metrics and result JSON as `vllm bench serve`.",
)
