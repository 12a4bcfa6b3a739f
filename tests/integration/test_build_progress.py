"""The dataset build's progress line (loadgen/session/build_progress.py) on a real event loop
with the build in a real thread: silent for a short build, then the time or the count on stderr, and
cleared at the end; off a terminal, plain lines through the output channel."""

from __future__ import annotations

import asyncio
import threading

import pytest

from loadgen import progress_bar
from loadgen.session import build_progress
from loadgen.session.build_progress import BuildProgress
from loadgen.session.threads import in_daemon_thread

WAIT_S = 20  # a bound the tests never reach unless the line is never drawn


def build_until_drawn(progress: BuildProgress, counts: bool) -> str:
    """A build that reports 3 of 10 prompts (if ``counts``) and ends once the line is drawn."""
    drawn = threading.Event()

    def build() -> str:
        if counts:
            progress.report(3, 10)
        assert drawn.wait(WAIT_S), "the progress line was never drawn"
        return "built"

    async def main() -> str:
        async def watch() -> None:
            while progress.bar is None:
                await asyncio.sleep(0.01)
            drawn.set()

        watcher = asyncio.ensure_future(watch())
        try:
            return await progress.show_while(in_daemon_thread(build))
        finally:
            watcher.cancel()

    return asyncio.run(main())


@pytest.fixture
def at_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Draw from the first tick on, as on a terminal."""
    monkeypatch.setattr(build_progress, "SHOW_AFTER_S", 0.0)
    monkeypatch.setattr(build_progress, "TICK_S", 0.01)
    monkeypatch.setattr(build_progress, "on_terminal", lambda: True)


@pytest.fixture
def in_a_log(at_once, monkeypatch: pytest.MonkeyPatch) -> None:
    """Stderr is no terminal, and plain lines are due at once."""
    monkeypatch.setattr(build_progress, "on_terminal", lambda: False)
    monkeypatch.setattr(progress_bar, "PLAIN_EVERY_S", 0.0)


def test_a_counted_build_shows_its_prompts(at_once, capsys) -> None:
    progress = BuildProgress("Building the random dataset", disabled=False)
    assert build_until_drawn(progress, counts=True) == "built"
    err = capsys.readouterr().err
    assert "Building the random dataset:  30%" in err and "3/10 prompts" in err
    assert "%|" not in err  # not the run's bar, which tests wait for (helpers.wait_for_t0)
    assert progress.bar is not None and progress.bar.disable  # closed


def test_an_uncounted_build_shows_its_time(at_once, capsys) -> None:
    progress = BuildProgress("Building the sharegpt dataset", disabled=False)
    assert build_until_drawn(progress, counts=False) == "built"
    assert "Building the sharegpt dataset: 00:0" in capsys.readouterr().err


def test_a_short_build_shows_nothing(capsys) -> None:
    progress = BuildProgress("Building the random dataset", disabled=False)

    async def main() -> int:
        return await progress.show_while(in_daemon_thread(lambda: 7))

    assert asyncio.run(main()) == 7
    assert capsys.readouterr().err == "" and progress.bar is None


def test_disabled_shows_nothing(at_once, capsys) -> None:
    progress = BuildProgress("Building the random dataset", disabled=True)

    async def main() -> str:
        def build() -> str:
            progress.report(1, 2)
            return "built"

        return await progress.show_while(in_daemon_thread(build))

    assert asyncio.run(main()) == "built"
    assert capsys.readouterr().err == "" and progress.bar is None


def test_a_failed_build_raises_its_error(at_once) -> None:
    progress = BuildProgress("Building the random dataset", disabled=False)

    def build() -> None:
        raise ValueError("bad flag")

    async def main() -> None:
        await progress.show_while(in_daemon_thread(build))

    with pytest.raises(ValueError, match="bad flag"):
        asyncio.run(main())


def test_off_a_terminal_a_build_shows_plain_lines(in_a_log, terminal, capsys) -> None:
    progress = BuildProgress("Building the random dataset", disabled=False)
    assert build_until_drawn(progress, counts=True) == "built"
    err = capsys.readouterr().err
    assert err.startswith("Building the random dataset: 3/10 prompts, 0 s\n"), err
    assert "\r" not in err and "\x1b" not in err


def test_plain_progress_says_its_count_at_most_every_interval(monkeypatch, caplog) -> None:
    clock = iter([0.0, 5.0, 10.0, 12.0, 21.0])
    monkeypatch.setattr(progress_bar.time, "monotonic", lambda: next(clock))
    bar = progress_bar.PlainProgress("Tokenizing", " calls")  # started at 0 s
    with caplog.at_level("INFO", logger="loadgen"):
        for _ in range(4):  # at 5, 10, 12 and 21 s
            bar.update()
    assert [r.getMessage() for r in caplog.records] == [
        "Tokenizing: 2 calls, 10 s",
        "Tokenizing: 4 calls, 21 s",
    ]
