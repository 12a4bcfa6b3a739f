"""Checks before a run starts (loadgen/session/preflight.py, loadgen/config/urls.py): the output
paths, the server URL, the worker count and the open-file limit; and a result file that cannot
be written at the end (loadgen/session/runner.py), with the records file kept."""

from __future__ import annotations

import dataclasses
import errno
import os
import resource
from pathlib import Path

import numpy as np
import pytest
from helpers import as_nobody, locked_directory

from loadgen.config import ConfigError, InputError, RunConfig, available_cores
from loadgen.config.urls import check_server_url, path_hint, url_problem
from loadgen.records.arrow_file import RecordsWriter
from loadgen.records.model import RunStart
from loadgen.records.redact import redact_text
from loadgen.session import preflight as pf
from loadgen.session import records as run_records
from loadgen.session.preflight import (
    OWN_FILES,
    PROBE_PREFIX,
    credentials_problem,
    directory_problem,
    existing_file_problem,
    open_files_message,
    open_files_needed,
    output_path_problem,
    preflight,
    raise_open_file_limit,
)
from loadgen.session.runner import _unwritten
from workers.protocol import RECORD_DTYPE

DENIED = "a file cannot be created there (Permission denied)"  # the probe's failure

# --- the output paths ---


def test_nothing_written_nothing_checked(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    config = RunConfig(result_dir=str(tmp_path / "file" / "sub"), save_records=False)
    assert output_path_problem(config) is None


@pytest.mark.parametrize(
    "asks",
    [
        {"save_result": True},
        {"append_result": True},
        {"save_records": True},
        {"plot_timeline": True, "save_records": False},
        {"plot_dataset_stats": True, "save_records": False},
    ],
)
def test_a_directory_under_a_file_is_refused_by_whatever_writes(tmp_path: Path, asks) -> None:
    (tmp_path / "file").write_text("x")
    result_dir = str(tmp_path / "file" / "sub")
    problem = output_path_problem(RunConfig(result_dir=result_dir, **asks))
    assert problem == f"--result-dir {result_dir}: {tmp_path / 'file'} is not a directory"


def test_result_dir_that_is_a_file(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    config = RunConfig(save_result=True, result_dir=str(tmp_path / "file"))
    assert output_path_problem(config) == (
        f"--result-dir {tmp_path / 'file'}: {tmp_path / 'file'} is not a directory"
    )


def test_a_missing_result_dir_that_can_be_created_passes_and_is_not_created(
    tmp_path: Path,
) -> None:
    config = RunConfig(save_result=True, result_dir=str(tmp_path / "a" / "b"))
    assert output_path_problem(config) is None
    assert not (tmp_path / "a").exists()


def test_a_directory_that_cannot_be_written(tmp_path: Path) -> None:
    with locked_directory(tmp_path) as locked:
        # As root the check runs as another user: root writes anywhere.
        problems = as_nobody(
            lambda: [
                output_path_problem(RunConfig(save_result=True, result_dir=str(path)))
                for path in (locked, locked / "new")
            ]
        )
    assert problems == [
        f"--result-dir {locked}: {locked} is not writable: {DENIED}",
        f"--result-dir {locked / 'new'}: {locked} is not writable: {DENIED}",
    ]


def test_the_probe_file_is_removed(tmp_path: Path) -> None:
    assert directory_problem(str(tmp_path)) is None
    assert list(tmp_path.iterdir()) == []


def test_proc_passes_the_permission_bits_but_not_the_probe() -> None:
    # /proc's mode is 0555, yet root passes os.access; no file can be made there.
    problem = directory_problem("/proc/x")
    assert problem is not None
    assert problem.startswith("/proc is not writable: a file cannot be created there (")
    assert not any(name.startswith(PROBE_PREFIX) for name in os.listdir("/proc"))


def test_an_existing_file_is_opened_for_writing_and_left_as_it_was(tmp_path: Path) -> None:
    file = tmp_path / "out.json"
    file.write_text("kept")
    assert existing_file_problem(str(file)) is None
    assert file.read_text() == "kept"
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # never opened: opening a FIFO for writing blocks until it is read
    assert existing_file_problem(str(fifo)) is None


def test_result_filename_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "out.json").mkdir()
    config = RunConfig(save_result=True, result_dir=str(tmp_path), result_filename="out.json")
    assert output_path_problem(config) == (
        f"--result-filename out.json: {tmp_path / 'out.json'} is a directory"
    )


def test_its_records_file_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "out.records.arrow").mkdir()
    config = RunConfig(save_result=True, result_dir=str(tmp_path), result_filename="out.json")
    assert output_path_problem(config) == (
        f"--result-filename out.json: the records file {tmp_path / 'out.records.arrow'} is a "
        "directory"
    )
    no_records = dataclasses.replace(config, save_records=False)  # nothing in the way
    assert output_path_problem(no_records) is None


def test_a_directory_in_the_result_filename_is_checked(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("x")
    name = str(tmp_path / "file" / "out.json")
    config = RunConfig(save_result=True, result_filename=name)
    assert output_path_problem(config) == (
        f"--result-filename {name}: {tmp_path / 'file'} is not a directory"
    )


def test_the_current_directory_by_default(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert output_path_problem(RunConfig(save_result=True)) is None
    assert directory_problem(".") is None


# --- the server's URL, the worker count ---


@pytest.mark.parametrize(
    ("url", "problem"),
    [
        ("http://127.0.0.1:8000", None),
        ("https://api.example.com/v1", None),
        ("http://[::1]:8000", None),
        ("http://u:p@h:8000", None),
        ("localhost:8000", "needs http:// or https:// before the host (as in http://localhost:8000)"),
        ("ftp://h", "needs http:// or https:// before the host (as in http://h)"),
        ("http://", "no host (as in http://HOST:PORT)"),
        ("http://h:99999", "not a URL (port out of range 0-65535)"),
        ("http://h:abc", "not a URL (port could not be cast to integer value as 'abc')"),
        ("http://h:0", "port 0 (a server's port is 1..65535)"),
        ("http://[::1", "not a URL (invalid IPv6 URL)"),
        ("http://h:8000?x=1", "the endpoint is added after it: no ?query or #fragment"),
        ("http://h :8000", "a URL has no blanks"),
        ("", "empty"),
    ],
)  # fmt: skip
def test_base_url_problems(url: str, problem: str | None) -> None:
    assert url_problem(url) == problem


def test_a_password_never_shows_in_a_url_error() -> None:
    message = check_server_url("http://me:s3cret@h:99999", "127.0.0.1", 8000, "")
    assert message == "--base-url http://me:***@h:99999: not a URL (port out of range 0-65535)"
    for fields in ({"base_url": "me:s3cret@h:8000"}, {"host": "me:s3cret@h"}):
        with pytest.raises(ConfigError) as caught:
            RunConfig(**fields).validate()
        assert "s3cret" not in str(caught.value) and "me:***@h" in str(caught.value)


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"host": ""}, "--host '': empty"),
        ({"host": "http://h"}, "--host 'http://h': a host name or address, not a URL (--base-url "
         "takes a URL)"),
        ({"port": 0}, "--port must be in 1..65535, got 0"),
        ({"port": 65536}, "--port must be in 1..65535, got 65536"),
        ({"base_url": "h:8000"}, "--base-url h:8000: needs http:// or https:// before the host "
         "(as in http://h:8000)"),
    ],
)  # fmt: skip
def test_server_flags_are_refused_up_front(fields, message: str) -> None:
    with pytest.raises(ConfigError) as caught:
        RunConfig(**fields).validate()
    assert str(caught.value) == message


def test_host_and_port_are_not_read_with_a_base_url() -> None:
    RunConfig(base_url="http://h:8000", port=0).validate()
    RunConfig(host="::1").validate()  # bracketed in the URL


def test_redact_text_masks_every_url_password() -> None:
    text = "GET http://u:p@h/v1/models and https://x:y:z@k:1 failed; mail a@b, http://h:8000/v1"
    assert redact_text(text) == (
        "GET http://u:***@h/v1/models and https://x:***@k:1 failed; mail a@b, http://h:8000/v1"
    )
    assert redact_text("http://u:p@[::1") == "http://u:***@[::1"  # even when it does not parse


@pytest.mark.parametrize(
    ("base_url", "endpoint", "given", "hint"),
    [
        ("http://h:8000/v1", "/v1/completions", False,
         "--base-url http://h:8000/v1 ends with /v1 and --endpoint /v1/completions (the "
         "default) starts with it: requests go to http://h:8000/v1/v1/completions; drop /v1 "
         "from --base-url unless the server serves that path"),
        ("http://u:pw@h/v1/", "/v1/chat/completions", True,
         "--base-url http://u:***@h/v1/ ends with / and --endpoint /v1/chat/completions starts "
         "with one: requests go to http://u:***@h/v1//v1/chat/completions; drop the last / from "
         "--base-url unless the server serves that path"),
        ("http://h/pooling", "/pooling", True,
         "--base-url http://h/pooling ends with /pooling and --endpoint /pooling starts with it: "
         "requests go to http://h/pooling/pooling; drop /pooling from --base-url unless the "
         "server serves that path"),
        ("http://h:8000", "/v1/completions", False, None),
        ("http://gw/openai", "/v1/completions", True, None),
        ("http://h/v1x", "/v1/completions", True, None),
        (None, "/v1/completions", False, None),
    ],
)  # fmt: skip
def test_a_doubled_path_gets_a_hint(base_url, endpoint, given, hint) -> None:
    assert path_hint(base_url, endpoint, given) == hint


def test_workers_above_four_per_core_are_refused() -> None:
    most = 4 * available_cores()
    RunConfig(workers=most).validate()
    with pytest.raises(ConfigError) as caught:
        RunConfig(workers=most + 1).validate()
    assert str(caught.value).startswith(f"--workers {most + 1} is more than 4 per available core")
    assert "60 MB" in str(caught.value)


def test_url_credentials_with_an_authorization_header(monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    config = RunConfig(base_url="http://u:s3cret@h:8000")
    assert credentials_problem(config) is None
    problem = credentials_problem(
        dataclasses.replace(config, headers={"authorization": "Bearer k"})
    )
    assert problem is not None and "--header Authorization" in problem
    assert "s3cret" not in problem and "u:***@h" in problem
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    problem = credentials_problem(config)
    assert problem is not None and "OPENAI_API_KEY" in problem
    assert credentials_problem(RunConfig(base_url="http://h:8000")) is None


# --- the open-file limit ---


def test_a_worker_holds_at_most_the_cap_and_its_share() -> None:
    need = open_files_needed(RunConfig(max_concurrency=1000, num_prompts=5000), 1)
    assert (need.files, need.certain) == (1000 + OWN_FILES, True)
    assert "a worker may hold 1000 connections at once (--max-concurrency 1000)" in need.holds
    # Two workers with 100 requests each: a worker holds no more than its share.
    need = open_files_needed(RunConfig(max_concurrency=1000, num_prompts=200), 2)
    assert need.files == 100 + OWN_FILES
    assert need.fix == "lower --max-concurrency"


def test_the_mock_server_holds_every_connection() -> None:
    need = open_files_needed(RunConfig(mock=True, max_concurrency=1000, num_prompts=2000), 4)
    assert need.files == 1000 + OWN_FILES
    assert need.holds.startswith("the mock server may hold 1000 connections")


def test_without_a_cap_every_request_may_be_in_flight() -> None:
    need = open_files_needed(RunConfig(num_prompts=9000), 3)
    assert (need.files, need.certain) == (3000 + OWN_FILES, True)
    assert "--num-prompts 9000 sent at once: no --max-concurrency" in need.holds
    assert need.fix == "set --max-concurrency"
    paced = open_files_needed(RunConfig(num_prompts=9000, request_rate=10.0), 3)
    assert (paced.files, paced.certain) == (3000 + OWN_FILES, False)
    assert "if requests pile up" in paced.holds


def test_a_whole_file_without_a_cap_counts_the_coordinator_only() -> None:
    config = RunConfig(dataset_name="custom", dataset_path="x.jsonl", num_prompts=0)
    need = open_files_needed(config, 2)
    assert need.holds.startswith("the coordinator")
    assert need.files == 64 + 4 * 2 + OWN_FILES


def test_the_message_says_what_is_needed_and_how_to_raise_it() -> None:
    need = open_files_needed(RunConfig(max_concurrency=1000), 1)
    message = open_files_message(need, 256)
    assert message.startswith("the open-file limit is 256, and a worker may hold 1000")
    assert "1064 open files" in message
    assert "ulimit -n 1064" in message and "LimitNOFILE" in message and "limits.conf" in message
    assert message.endswith("or lower --max-concurrency")
    assert "\n" not in message


def test_the_soft_limit_is_raised_to_the_hard_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    limit = raise_open_file_limit()
    if hard != resource.RLIM_INFINITY:
        assert limit == hard == resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert limit >= soft


def test_preflight_refuses_or_warns_past_the_limit(terminal, monkeypatch, capsys, tmp_path) -> None:
    monkeypatch.setattr(pf, "raise_open_file_limit", lambda: 256)
    with pytest.raises(InputError) as caught:
        preflight(RunConfig(max_concurrency=1000, num_prompts=1000, workers=1))
    assert str(caught.value).startswith("the open-file limit is 256")
    preflight(RunConfig(num_prompts=1000, request_rate=5.0, workers=1))
    assert capsys.readouterr().out.startswith("warning: the open-file limit is 256")
    preflight(RunConfig(max_concurrency=100, num_prompts=1000, workers=1))
    assert capsys.readouterr().out == ""
    with pytest.raises(InputError) as caught:  # the paths are checked first
        preflight(RunConfig(save_result=True, result_dir="/dev/null/x"))
    assert str(caught.value) == "--result-dir /dev/null/x: /dev/null is not a directory"


def test_preflight_warns_of_a_doubled_path(terminal, capsys) -> None:
    preflight(RunConfig(base_url="http://h:8000/v1", num_prompts=10))
    out = capsys.readouterr().out
    assert out.startswith("warning: --base-url http://h:8000/v1 ends with /v1")
    assert out.count("\n") == 1


# --- a write that fails at the end ---


def test_a_result_file_that_cannot_be_written_is_one_line() -> None:
    full = OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert _unwritten("r.json", full, None) == (
        "cannot write the result file r.json: No space left on device"
    )
    assert _unwritten("d/r.json", full, "d/r.records.arrow") == (
        "cannot write the result file d/r.json: No space left on device; the run's records are "
        "in d/r.records.arrow (loadgen report d/r.records.arrow --save-result --result-dir DIR "
        "rebuilds it)"
    )
    denied = PermissionError(errno.EACCES, os.strerror(errno.EACCES), "d")
    assert _unwritten("d/r.json", denied, None) == (
        "cannot write the result file d/r.json: Permission denied: d"
    )


@pytest.mark.skipif(not os.path.exists("/dev/full"), reason="needs /dev/full")
def test_a_records_file_on_a_full_disk_warns_and_never_raises(terminal, capsys) -> None:
    start = RunStart(
        loadgen_version="0",
        command_line=[],
        config={},
        model_id="m",
        tokenizer_id=None,
        num_requests=2,
        num_workers=1,
        connections=0,
        schedule_sha256="",
        t0_ns=0,
        t0_wall="",
        counters_before=None,
    )
    ones = np.ones(2, np.int64)
    writer = RecordsWriter("/dev/full", start, np.zeros(2, np.int64), ones, ones, None)
    writer.start(0, "", 0)
    rows = np.zeros(2, dtype=RECORD_DTYPE)
    rows["index"] = [0, 1]
    writer.write(0, rows, np.zeros(0, np.int64), {}, {})
    writer.close()  # the footer, then the buffered stream's own flush: neither raises
    assert writer.failure is not None and "No space left on device" in writer.failure
    out = capsys.readouterr().out
    assert out.startswith("warning: records file /dev/full") and out.count("\n") == 1


def test_records_that_cannot_be_renamed_keep_their_name(terminal, monkeypatch, capsys) -> None:
    class Finished:
        path = "/results/run-date1.records.arrow"
        failure = None
        temporary = False

        def finish(self, collected, end) -> None:
            pass

    def refuse(path: str, destination: str) -> str:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), path)

    monkeypatch.setattr(run_records, "move", refuse)
    kept = run_records.finish_records(Finished(), None, None, "/results/run-date2.json")  # type: ignore[arg-type]
    assert kept == Finished.path
    assert capsys.readouterr().out == (
        f"warning: records file {Finished.path} keeps its name (Permission denied)\n"
    )


def test_with_every_worker_on_other_hosts_only_this_hosts_processes_count() -> None:
    need = open_files_needed(RunConfig(max_concurrency=1000, num_prompts=5000), 0)
    assert need.holds.startswith("the coordinator")
    mock = open_files_needed(RunConfig(mock=True, max_concurrency=1000, num_prompts=5000), 0)
    assert mock.holds.startswith("the mock server may hold 1000 connections")
