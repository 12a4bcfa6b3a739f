"""Shared fixtures, and the kind markers: each test is marked ``unit``, ``integration`` or ``e2e``
by the directory it lives in (``pytest -m "not e2e"`` is the fast loop)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import helpers
import pytest
import pytest_timeout
from tokenizers import Tokenizer

from loadgen.text.tokenizer import MOCK_MODEL_NAME, LocalTokenizer, load_tokenizer

KINDS = ("unit", "integration", "e2e")
TESTS = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        kind = item.path.relative_to(TESTS).parts[0]
        if kind not in KINDS:
            raise pytest.UsageError(
                f"{item.nodeid}: a test belongs in tests/unit, integration or e2e"
            )
        item.add_marker(kind)


@pytest.hookimpl(tryfirst=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: pytest_timeout.Settings) -> bool:
    """An e2e test's timeout (setup.cfg's, or its ``timeout`` mark) is seconds on a quiet
    machine: stretched by ``hang_guard``, measured on this machine before the timer is set (the
    first e2e test of a session pays for the calibration outside its own timeout)."""
    if item.get_closest_marker("e2e") is not None:
        settings = settings._replace(timeout=helpers.hang_guard(settings.timeout))
    return pytest_timeout.pytest_timeout_set_timer(item=item, settings=settings)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The calibration the time bounds came from, when a test asked for it: this process's, or
    each pytest-xdist worker's (each measures its own, beside the others)."""
    if helpers._calibration.cache_info().currsize:
        WORKER_CALIBRATIONS[""] = helpers._calibration()
    for worker, (wall, cpu) in sorted(WORKER_CALIBRATIONS.items()):
        slowdown = max(1.0, wall / cpu) if cpu > 0 else 1.0
        terminalreporter.write_line(
            f"time bounds{f' ({worker})' if worker else ''}: a trivial CLI run took {wall:.2f} s "
            f"here (startup_s), {slowdown:.2f}x its CPU time (slowdown)"
        )


# The calibrations of the pytest-xdist workers that measured one, by worker id (gw0, ...).
WORKER_CALIBRATIONS: dict[str, tuple[float, float]] = {}


def pytest_sessionfinish(session: pytest.Session) -> None:
    """A pytest-xdist worker hands its calibration to the controller, which prints it."""
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None and helpers._calibration.cache_info().currsize:
        workeroutput["calibration"] = helpers._calibration()


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller: keep a finished worker's calibration."""
    calibration = getattr(node, "workeroutput", {}).get("calibration")
    if calibration is not None:
        WORKER_CALIBRATIONS[node.gateway.id] = tuple(calibration)


@pytest.fixture(autouse=True, scope="session")
def private_cache_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Runs under test (and the processes they start) keep their dataset cache in a temporary
    directory, not the user's $XDG_CACHE_HOME."""
    patch = pytest.MonkeyPatch()
    patch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    yield
    patch.undo()


@pytest.fixture(autouse=True, scope="session")
def stop_shared_mock_servers() -> Iterator[None]:
    """The mock servers that runs in this process shared (helpers.run_in_process), stopped as
    the session ends."""
    yield
    helpers.stop_shared_mock_servers()


@pytest.fixture(scope="module")
def tok() -> LocalTokenizer:
    """The mock's packaged tokenizer, as the datasets use it."""
    return LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME))


@pytest.fixture(scope="module")
def raw_tok() -> Tokenizer:
    """The mock's packaged tokenizer itself (a ``tokenizers.Tokenizer``), as the mock uses it."""
    return load_tokenizer(MOCK_MODEL_NAME)


@pytest.fixture
def terminal() -> Iterator[None]:
    """loadgen's notes and warnings printed as the CLI prints them (loadgen/console.py), for a
    test that reads them with capsys; without it they go to no stream."""
    from loadgen.console import terminal_output

    with terminal_output():
        yield
