"""The worker's send and read stamps against every server personality, checked with the recording
mock's own clock: no stamp is ever earlier than the server's matching instant, and a request that
opened a connection (llama.cpp closes after every stream) has that opening inside its TTFT, as
upstream counts it (docs/compat.md, "Send instant")."""

from __future__ import annotations

import urllib.request
from pathlib import Path

import numpy as np
import pytest

from loadgen.calibrate import ClientStep
from loadgen.cli.calibrate import run_step
from loadgen.mock.process import EmbeddedMockServer
from loadgen.mock.recorder import TimingRecords
from loadgen.records.read import read_records
from loadgen.timing_error import compare

PERSONALITIES = ("vllm", "sglang", "llamacpp", "tgi", "openai")
# llama.cpp's and OpenAI's last completion chunk carries choices (a finish_reason, no text): a
# token event by upstream's rule, one the mock does not record as a token written.
EXTRA_EVENTS = {"llamacpp": 1, "openai": 1}


@pytest.mark.parametrize("personality", PERSONALITIES)
def test_stamps_are_never_before_the_servers_and_a_connection_s_opening_is_in_ttft(
    tmp_path: Path, personality: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")  # the openai personality wants a key
    server = EmbeddedMockServer(
        0.0, 5.0, extra_args=("--record-timings", str(tmp_path / "t.npz"), "--personality",
                              personality),
    )  # fmt: skip
    try:
        url = server.start(30)
        step = ClientStep(0, 8, 24, 100.0, 2, 32, 8, 90.0, result_dir=tmp_path / "step-0")
        client = run_step(url, step).client
        asked = urllib.request.Request(url + "/timings", headers={"Authorization": "Bearer sk-t"})
        with urllib.request.urlopen(asked, timeout=30) as response:
            timings = TimingRecords.from_bytes(response.read())
    finally:
        server.kill()
    prefix = step.prefix
    comparison = compare(client, timings, prefix)
    assert (comparison.failed, comparison.unrecorded) == (0, 0)
    rows = {request_id: row for row, request_id in enumerate(timings.request_ids.tolist())}
    for i in range(len(client.ttft_s)):
        server_events = len(timings.events_of(rows[f"{prefix}{i}"]))
        assert len(client.events_of(i)) == server_events + EXTRA_EVENTS.get(personality, 0)
    assert (comparison.ttft_error_s >= 0).all()  # never a TTFT shorter than the server's
    assert (comparison.delivery_s > 0).all()  # nothing read before it was written
    assert (comparison.send_leg_s > 0).all()  # nothing sent after the server had it

    records = read_records(str(tmp_path / "step-0" / "step.records.arrow")).records
    connect_s = records["connect_ns"][np.argsort(records["index"])] / 1e9
    opened = connect_s > 0
    # The send instant is moved back by the opening: the server has the request at least that
    # long after it.
    assert (comparison.send_leg_s[opened] >= connect_s[opened]).all()
    if personality == "llamacpp":
        assert opened.sum() >= len(opened) // 2  # it closes after every stream
