"""What the machine must allow before anything starts: the output files and the open files.

``preflight`` runs after the flags are validated and before the mock server, the workers or any
request start: a run that could not write its results, or whose connections would run out of
file descriptors, is refused in one line (an ``InputError``, exit 1) rather than failing at its
end or failing thousands of requests with "Too many open files". Where the results go is tried
for real: a probe file is created there and removed (permission bits pass for root, a
read-only mount and /proc). It also raises the open-file limit to the hard limit (the workers
and the mock server inherit it), refuses a base URL with a password beside an Authorization
header (aiohttp sends neither), and warns of a base URL and endpoint that join into a doubled
path.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import resource
import sys
import tempfile
from dataclasses import dataclass
from urllib.parse import urlsplit

from loadgen.config import ConfigError, InputError, RunConfig
from loadgen.config.urls import path_hint
from loadgen.fleet.placement import planned_workers
from loadgen.records.arrow_file import records_path
from loadgen.records.redact import redact_text
from loadgen.report.result_json import result_path
from loadgen.report.settings import output_of, settings_of
from loadgen.server.adaptive_limit import MAXIMUM as SERVER_TOKENIZER_CONNECTIONS
from loadgen.server.client import auth_headers
from loadgen.session.records import saves_records

log = logging.getLogger(__name__)

# Open files a process needs besides its connections: Python and its libraries, ZeroMQ, the
# event loop (about 25 measured in a worker and in the coordinator).
OWN_FILES = 64
FILES_PER_WORKER = 4  # the coordinator's, per worker: its ZeroMQ connection and process pipes
RAISE_LIMIT_HOW = (
    "ulimit -n {n} in the shell that starts loadgen; above the hard limit: nofile in "
    "/etc/security/limits.conf, LimitNOFILE= for a systemd service, docker run --ulimit "
    "nofile={n}"
)


def preflight(config: RunConfig) -> None:
    """Refuse a run whose results cannot be written or whose connections the open-file limit
    cannot hold; raise that limit to the hard limit; warn of a doubled path."""
    if problem := output_path_problem(config):
        raise InputError(problem)
    if problem := credentials_problem(config):
        raise ConfigError(problem)
    limit = raise_open_file_limit()
    need = open_files_needed(config, planned_workers(config))
    if need.files > limit:
        message = open_files_message(need, limit)
        if need.certain:
            raise InputError(message)
        log.warning(f"warning: {message}")
    if hint := path_hint(config.base_url, config.endpoint, "--endpoint" in config.given):
        log.warning(f"warning: {hint}")


# --- the output files ---


def writes_files(config: RunConfig) -> bool:
    """Whether the run writes anything: the result file, the records file or a plot."""
    return bool(
        config.save_result
        or config.append_result
        or saves_records(config)
        or config.plot_timeline
        or config.plot_dataset_stats
    )


def output_path_problem(config: RunConfig) -> str | None:
    """Why the result file, the records file or the plots beside them could not be written
    where the flags put them, in one line naming the flag and the path; None when they can (or
    nothing is written). The file's name may hold the model's id, unknown yet; its directory
    does not."""
    if not writes_files(config):
        return None
    path = result_path(settings_of(config), output_of(config), "model", "date")
    directory = os.path.dirname(path)
    if config.result_dir:
        shown = f"--result-dir {config.result_dir}"
    elif directory:
        shown = f"--result-filename {config.result_filename}"
    else:
        shown = f"the current directory {os.getcwd()} (--result-dir names another)"
    if problem := directory_problem(directory or "."):
        return f"{shown}: {problem}"
    if not config.result_filename:
        return None
    files = [("", path)]
    if saves_records(config):
        files.append(("the records file ", records_path(path)))
    for what, file in files:
        if problem := existing_file_problem(file):
            return f"--result-filename {config.result_filename}: {what}{problem}"
    return None


def file_path_problem(path: str) -> str | None:
    """Why a file could not be written at ``path`` (its directory, or the file there), in one
    line naming the path; None when it can."""
    return directory_problem(os.path.dirname(path) or ".") or existing_file_problem(path)


def existing_file_problem(path: str) -> str | None:
    """Why the file already at ``path`` could not be written over, or None (or none is there):
    it is a directory, or opening it for writing fails (tried without changing it)."""
    if os.path.isdir(path):
        return f"{path} is a directory"
    if not os.path.isfile(path):  # none there, or a device or FIFO (/dev/null): not opened
        return None
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_APPEND))
    except OSError as exc:
        return f"{path} is not writable ({exc.strerror})"
    return None


def directory_problem(directory: str) -> str | None:
    """Why files cannot be created in ``directory``, or None: it is a directory, or it can be
    created (its nearest existing ancestor is one), and a probe file can be created there and
    removed. Permission bits are not asked: root passes them, and a read-only mount or /proc
    pass them too (the run would be sent whole, its result and records then lost)."""
    existing = os.path.abspath(directory)
    while not os.path.lexists(existing) and os.path.dirname(existing) != existing:
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        return f"{existing} is not a directory"
    return probe_problem(existing)


PROBE_PREFIX = ".loadgen-probe-"


def probe_problem(directory: str) -> str | None:
    """Create a probe file in ``directory`` and remove it: why that failed, or None."""
    try:
        fd, probe = tempfile.mkstemp(prefix=PROBE_PREFIX, dir=directory)
    except OSError as exc:
        return f"{directory} is not writable: a file cannot be created there ({exc.strerror})"
    os.close(fd)
    try:
        os.unlink(probe)
    except OSError as exc:
        return f"{directory} is not writable: {probe} cannot be removed ({exc.strerror})"
    return None


# --- the server's URL ---


def credentials_problem(config: RunConfig) -> str | None:
    """A user and password in the base URL with an Authorization header as well: aiohttp
    refuses to send both (every request would fail)."""
    parts = urlsplit(config.server_url)
    if parts.username is None and parts.password is None:
        return None
    if not any(key.lower() == "authorization" for key in auth_headers(config.headers)):
        return None
    given = any(key.lower() == "authorization" for key in config.headers)
    source = "--header Authorization=..." if given else "OPENAI_API_KEY"
    return (
        f"--base-url {redact_text(config.server_url)} holds a user and password, and {source} "
        "sets an Authorization header: a request can carry only one; drop the other"
    )


# --- the open-file limit ---


def raise_open_file_limit() -> int:
    """Raise the soft open-file limit to the hard limit (the workers and the mock server,
    spawned later, inherit it); the limit now in force."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft != hard:
        # An unlimited hard limit may be refused as a soft one (macOS): the soft one stays.
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    return sys.maxsize if soft == resource.RLIM_INFINITY else soft


@dataclass(frozen=True)
class OpenFiles:
    """The most open files one process of the run may need, and why."""

    files: int
    holds: str  # "a worker may hold 1000 connections at once (--max-concurrency 1000)"
    fix: str  # the flag that needs fewer: "lower --max-concurrency"
    certain: bool  # that many may be open whatever the server does; else (a paced run with no
    # cap) only if requests pile up


def open_files_needed(config: RunConfig, num_workers: int) -> OpenFiles:
    """The busiest process's need: a worker holds at most its share of the requests and at most
    --max-concurrency (credits can gather at one worker); the mock server (--mock) holds every
    connection; the coordinator its warm-ups, the server tokenizer's calls and a few files per
    worker. Each also has ``OWN_FILES``. Without --max-concurrency every request may be in
    flight at once: surely at --request-rate inf, else if requests pile up; unknown
    with --num-prompts 0 (a whole file), when only the coordinator is counted."""
    n = config.num_prompts if config.num_prompts > 0 else None
    cap = config.concurrency
    warmups = min(config.num_warmups, cap or config.num_warmups)
    coordinator = warmups + SERVER_TOKENIZER_CONNECTIONS + FILES_PER_WORKER * num_workers
    needs = [
        OpenFiles(
            coordinator + OWN_FILES,
            f"the coordinator may hold {coordinator} connections and pipes at once "
            f"(--num-warmups {config.num_warmups}, --workers {num_workers}, the server "
            "tokenizer's calls)",
            "lower --workers",
            certain=True,
        )
    ]
    if n is None and cap is None:
        return needs[0]
    total = cap if n is None else (n if cap is None else min(cap, n))
    assert total is not None
    certain = cap is not None or (
        math.isinf(config.rate) and config.ramp_up_strategy is None and not config.self_timed_trace
    )
    if cap is not None:
        why, fix = f"--max-concurrency {cap}", "lower --max-concurrency"
    elif certain:
        why, fix = f"--num-prompts {n} sent at once: no --max-concurrency", "set --max-concurrency"
    else:
        why, fix = f"--num-prompts {n} without --max-concurrency", "set --max-concurrency"
    when = "" if certain else " if requests pile up"
    if num_workers > 0:  # else every worker joins from another host (--remote-workers)
        worker = total if n is None else min(total, _busiest_share(n, num_workers, cap))
        spread = f", --workers {num_workers}" if num_workers > 1 else ""
        holds = f"a worker may hold {worker} connections at once{when} ({why}{spread})"
        needs.append(OpenFiles(worker + OWN_FILES, holds, fix, certain))
    if config.mock:
        holds = f"the mock server may hold {total} connections at once{when} ({why})"
        needs.append(OpenFiles(total + OWN_FILES, holds, fix, certain))
    return max(needs, key=lambda need: need.files)


def _busiest_share(num_requests: int, num_workers: int, cap: int | None) -> int:
    """Requests of the busiest worker (worker 0) as ``schedule.assign_workers`` deals them:
    round-robin over ``cap`` slots (``num_workers`` without a cap), slot s to worker s % W."""
    slots = cap or num_workers
    rounds, rest = divmod(num_requests, slots)
    return rounds * -(-slots // num_workers) + -(-rest // num_workers)


def open_files_message(need: OpenFiles, limit: int) -> str:
    """One line: the limit, what needs more, and how to raise it or need less."""
    return (
        f"the open-file limit is {limit}, and {need.holds}: {need.files} open files with its "
        f"own. Raise the limit ({RAISE_LIMIT_HOW.format(n=need.files)}) or {need.fix}"
    )
