"""The `loadgen` command line: `loadgen run` (a drop-in for `vllm bench serve`),
`loadgen report` (a run's report rebuilt from its records file), `loadgen compare` (runs side
by side), `loadgen mock-server`, `loadgen calibrate`, and `loadgen worker` with `loadgen keygen`
(workers that join a run from other hosts), one module each.

The only package that imports click. The options of `run` and `mock-server` are made from their
flag tables (loadgen/config/flags.py, loadgen/mock/config.py) by options.py; vllm_compat.py
reads `run`'s argv as upstream's parser does. A command's module is imported when the command
is used: the mock server, started for every `--mock` run, does not load the benchmark. What
the commands' modules tell the user comes through one channel (loadgen/console.py), shown here
as plain lines on stdout and stderr by each command (``streams.show_output``).
"""

from __future__ import annotations

import os
import sys

import click

from loadgen import __version__

COMMANDS = ("calibrate", "compare", "keygen", "mock-server", "report", "run", "worker")


class Commands(click.Group):
    """The subcommands, each imported on first use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context | None, name: str) -> click.Command | None:
        if name == "run":
            from loadgen.cli.run import run_command

            return run_command
        if name == "mock-server":
            from loadgen.cli.mock_server import mock_server_command

            return mock_server_command
        if name == "report":
            from loadgen.cli.report import report_command

            return report_command
        if name == "compare":
            from loadgen.cli.compare import compare_command

            return compare_command
        if name == "worker":
            from loadgen.cli.worker import worker_command

            return worker_command
        if name == "keygen":
            from loadgen.cli.worker import keygen_command

            return keygen_command
        if name == "calibrate":
            from loadgen.cli.calibrate import calibrate_command

            return calibrate_command
        return None


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="loadgen")
def cli() -> None:
    """loadgen: a multi-process benchmark client for OpenAI-compatible inference servers."""


# The libraries' own progress bars (hub downloads, `datasets` loading) redraw with carriage
# returns; off a terminal (a log, a CI job) they are off, read by those libraries at import.
LIBRARY_BARS_OFF = ("HF_HUB_DISABLE_PROGRESS_BARS", "HF_DATASETS_DISABLE_PROGRESS_BARS")


def main() -> None:
    """Console-script entry point."""
    if not sys.stderr.isatty():
        for name in LIBRARY_BARS_OFF:
            os.environ.setdefault(name, "1")
    cli()
