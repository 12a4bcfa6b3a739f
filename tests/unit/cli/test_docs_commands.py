"""Every `loadgen run` command written in the README and docs/ parses: its flags exist and its
values are accepted (click and RunConfig's checks), so a page's example cannot rot silently.
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


def run_commands(text: str) -> list[str]:
    """The `loadgen run` commands of a page's code blocks, continuation lines joined."""
    commands = []
    for block in re.findall(r"```(?:bash|console|sh)\n(.*?)```", text, re.S):
        joined = re.sub(r"\\\n\s*", " ", block)
        for line in joined.splitlines():
            line = line.removeprefix("$ ").strip()
            for part in re.split(r"\s*(?:&&|;)\s*", line):
                if re.match(r"(\.venv/bin/)?loadgen run( |$)", part):
                    commands.append(part.split("#", 1)[0].strip())
    return commands


COMMANDS = [
    (page.relative_to(ROOT).as_posix(), command)
    for page in PAGES
    for command in run_commands(page.read_text())
]


def argv_of(command: str) -> list[str]:
    """The command's arguments after `loadgen run`, up to a placeholder, a server named by a
    variable given a URL."""
    words = [SERVER.get(w, w) for w in shlex.split(command)[2:]]
    return words[: next((i for i, w in enumerate(words) if w == "..."), len(words))]


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
