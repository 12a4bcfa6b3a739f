"""Fail fast: the first requests of a run all failing alike stop it, with the likely fix."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.fleet.collector import BatchObserver, RecordBatch
from loadgen.session.fail_fast import FailFast, FirstFailures, likely_fix
from workers.protocol import RECORD_DTYPE


def rows(statuses: list[int], start: int = 0, success: bool = False) -> np.ndarray:
    out = np.zeros(len(statuses), dtype=RECORD_DTYPE)
    out["index"] = np.arange(start, start + len(statuses))
    out["status"] = statuses
    out["success"] = success
    return out


def errors(batch: np.ndarray, message: str = "HTTP 404 Not Found: no such model") -> dict:
    return {int(i): message for i in batch["index"]}


def test_twenty_alike_404s_stop_the_run_over_several_batches():
    watch = FirstFailures(1000)
    first = rows([404] * 12)
    assert not watch.observe(first, errors(first))
    second = rows([404] * 12, start=12)
    assert watch.observe(second, errors(second))
    assert watch.seen == 20
    line = watch.stop_line("openai", "/v1/completions", "m")
    assert line.startswith("the first 20 requests all failed with 'HTTP 404 Not Found: no such")


def test_the_run_is_judged_at_its_first_success_or_once_the_first_twenty_are_in():
    watch = FirstFailures(1000)
    batch = rows([404] * 3)
    watch.observe(batch, errors(batch))
    assert not watch.judged  # the records file waits while the first requests fail alike
    ok = rows([200], start=3, success=True)
    watch.observe(ok, {})
    assert watch.judged  # a success: the run will not stop so
    watch = FirstFailures(1000)
    batch = rows([404] * 20)
    assert watch.observe(batch, errors(batch)) and watch.judged


def test_a_smaller_run_stops_after_all_of_its_requests():
    watch = FirstFailures(5)
    batch = rows([401] * 5)
    assert watch.observe(batch, errors(batch, "HTTP 401 Unauthorized"))


@pytest.mark.parametrize(
    ("statuses", "messages"),
    [
        ([404] * 19 + [200], None),  # one success
        ([404] * 19 + [400], None),  # another status
        ([429] * 20, None),  # rate limited: the server's load, not a mistake
        ([408] * 20, None),
        ([500] * 20, None),  # a server error is not the command's mistake
        ([404] * 20, ["a"] * 19 + ["b"]),  # another message
    ],
)
def test_failures_that_differ_or_are_not_mistakes_never_stop_a_run(statuses, messages):
    watch = FirstFailures(1000)
    batch = rows(statuses)
    batch["success"] = batch["status"] == 200
    found = {i: m for i, m in enumerate(messages)} if messages else errors(batch, "HTTP 4xx: same")
    assert not watch.observe(batch, found)
    later = rows([404] * 40, start=20)
    assert not watch.observe(later, errors(later))  # only the first 20 count


@pytest.mark.parametrize(
    ("status", "error", "backend", "hint"),
    [
        (401, "HTTP 401", "openai", "OPENAI_API_KEY"),
        (404, "The model `x` does not exist.", "openai", "Is --model m served?"),
        (404, "Not Found", "openai", "(a chat-only server: --backend openai-chat)"),
        (404, "Not Found", "openai-chat", "Does the server serve /e?"),
        (422, "bad field", "openai", "refused the request body"),
    ],
)
def test_the_likely_fix_names_the_flag(status, error, backend, hint):
    assert hint in likely_fix(status, error, backend, "/e", "m")


class Written(BatchObserver):
    """Stands in for the records file: the request indices of each batch it was handed."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.ended = False

    def batch(self, batch: RecordBatch) -> bool:
        self.batches.append(batch.rows["index"].tolist())
        return False

    def end(self) -> None:
        self.ended = True


def as_batch(rows_: np.ndarray, message: str = "HTTP 404 Not Found: no such model") -> RecordBatch:
    return RecordBatch(0, rows_, np.zeros(0, np.int64), errors(rows_, message), {})


def test_fail_fast_holds_the_records_file_back_until_it_has_judged_then_stops_the_run():
    written = Written()
    rule = FailFast(1000, written)
    assert not rule.batch(as_batch(rows([404] * 12)))
    assert written.batches == []  # judged first: the file waits
    assert rule.batch(as_batch(rows([404] * 12, start=12)))  # the 20th: stop
    assert rule.stopped
    assert written.batches == [list(range(12)), list(range(12, 24))]  # in order, all of them
    assert not rule.batch(as_batch(rows([404], start=24)))  # judged: straight on
    assert written.batches[-1] == [24]
    assert rule.stop_line("openai", "/v1/completions", "m").startswith("the first 20 requests")


def test_fail_fast_hands_batches_on_at_once_after_a_success_and_the_rest_at_the_end():
    written = Written()
    rule = FailFast(1000, written)
    rule.batch(as_batch(rows([404] * 3)))
    assert not rule.batch(as_batch(rows([200], start=3, success=True), message=""))
    assert written.batches == [[0, 1, 2], [3]] and not rule.stopped
    held = FailFast(1000, Written())
    held.batch(as_batch(rows([404] * 3)))
    held.end()  # the run ended before the first requests were judged: the file gets them
    assert held.then.batches == [[0, 1, 2]] and held.then.ended
