"""Every `loadgen run` command written in the README and docs/ parses: its flags exist and its
values are accepted (click and RunConfig's checks), so a page's example cannot rot silently;
so does every `loadgen compare`, `report` and `calibrate` command (click's checks).
A command is checked up to a `...` placeholder; `$SERVER` stands for a URL."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from loadgen.cli.options import given, given_values
from loadgen.cli.run import mock_flags_conflict, run_command
from loadgen.config import RUN_FLAGS, ConfigError, RunConfig

ROOT = Path(__file__).parents[3]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
SERVER = {"$SERVER": "http://127.0.0.1:8000"}  # a server named by a variable in an example


def run_commands(text: str, command: str = "run") -> list[str]:
    """The `loadgen COMMAND` commands of a page's code blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.removeprefix("$ ").strip()
            for part in re.split(r"\s*(?:&&|;)\s*", line):
                if re.match(rf"(\.venv/bin/)?loadgen {command}( |$)", part):
                    commands.append(part.split("#", 1)[0].strip())
    return commands


COMMANDS = [
    (page.relative_to(ROOT).as_posix(), command)
    for page in PAGES
    for command in run_commands(page.read_text())
]


OTHER_COMMANDS = [
    (page.relative_to(ROOT).as_posix(), name, command)
    for page in PAGES
    for name in ("compare", "report", "calibrate")
    for command in run_commands(page.read_text(), name)
]


def argv_of(command: str) -> list[str]:
    """The command's arguments after `loadgen COMMAND`, up to a placeholder or a redirection,
    a server named by a variable given a URL."""
    words = [SERVER.get(w, w) for w in shlex.split(command)[2:]]
    # Up to a placeholder or the shell's own syntax (a redirection, a pipe).
    ends = ("...", ">", ">>", "|", "&", "2>&1")
    return words[: next((i for i, w in enumerate(words) if w in ends), len(words))]


def test_the_pages_hold_commands() -> None:
    pages = {page for page, _ in COMMANDS}
    assert "README.md" in pages and "docs/tasks/benchmark-a-vllm-server.md" in pages


@pytest.mark.parametrize(("page", "command"), COMMANDS)
def test_a_documented_command_parses(page: str, command: str) -> None:
    try:
        ctx = run_command.make_context("loadgen run", argv_of(command))
        flags_given = given(ctx, RUN_FLAGS)
        assert mock_flags_conflict(bool(ctx.params["mock"]), flags_given) is None
        RunConfig(**given_values(ctx, RUN_FLAGS), given=flags_given).validate()
    except (click.UsageError, ConfigError) as exc:
        pytest.fail(f"{page}: `{command}`: {exc}")


def test_the_pages_hold_other_commands() -> None:
    held = {(page, name) for page, name, _ in OTHER_COMMANDS}
    assert ("docs/tasks/compare-two-builds.md", "compare") in held
    assert ("docs/tasks/compare-two-builds.md", "report") in held


@pytest.mark.parametrize(("page", "name", "command"), OTHER_COMMANDS)
def test_a_documented_compare_report_or_calibrate_parses(
    page: str, name: str, command: str
) -> None:
    from loadgen.cli import cli

    group = click.Context(cli)
    subcommand = cli.get_command(group, name)
    assert subcommand is not None
    try:
        subcommand.make_context(f"loadgen {name}", argv_of(command), parent=group)
    except click.UsageError as exc:
        pytest.fail(f"{page}: `{command}`: {exc}")
