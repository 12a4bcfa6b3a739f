"""The coordinator's words about its remote workers: the join hint names an address a worker
can connect to, refused keys are remembered up to a bound and warned of five times, then
counted, and what a peer says of itself reaches the terminal printable."""

from __future__ import annotations

from loadgen.fleet.worker_channel import (
    MAX_REFUSED_KEYS,
    REMOTE,
    AdmitCurveKey,
    Member,
    join_hint,
)
from loadgen.terminal import CappedWarnings


def test_the_join_hint_for_a_wildcard_bind_names_the_host_and_its_addresses():
    for endpoint in ("tcp://0.0.0.0:5557", "tcp://[::]:5557"):
        hint = join_hint(endpoint, 2, hostname="bench-7", addresses=["10.1.2.3", "fd00::5"])
        assert hint == (
            "Waiting for 2 remote workers: loadgen worker --connect tcp://bench-7:5557 --key "
            "worker.key (this host's addresses: 10.1.2.3, fd00::5)"
        )
        assert "0.0.0.0" not in hint and "[::]" not in hint


def test_the_join_hint_of_this_host_never_says_0_0_0_0():
    hint = join_hint("tcp://0.0.0.0:5557", 1)
    assert "0.0.0.0" not in hint and "--connect tcp://" in hint and ":5557 --key" in hint


def test_the_join_hint_keeps_an_address_given_to_listen():
    hint = join_hint("tcp://192.168.4.2:6000", 1)
    assert "--connect tcp://192.168.4.2:6000 --key worker.key" in hint
    assert "this host's addresses" not in hint


def test_refused_keys_are_warned_five_times_then_counted_and_remembered_up_to_a_bound():
    lines: list[str] = []
    warnings = CappedWarnings(sink=lines.append)
    admit = AdmitCurveKey("W" * 40, warnings)
    assert admit.callback("*", b"W" * 40)
    for k in range(MAX_REFUSED_KEYS + 50):
        key = f"{k:040d}".encode()
        assert not admit.callback("*", key)
        assert not admit.callback("*", key)  # the same key again: not news
    assert len(admit.refused) == MAX_REFUSED_KEYS
    assert len(lines) == 5
    assert lines[0].startswith("warning: refused a worker whose key is not this run's")
    assert "(public key 00000000...)" in lines[0] and "`loadgen keygen`" in lines[0]
    warnings.flush()
    total = MAX_REFUSED_KEYS + 2 * 50  # keys past the bound are not remembered: counted again
    assert lines[-1] == (
        f"warning: {total - 5} more refused worker keys not shown ({total} in all)"
    )


def test_a_remote_host_name_is_printed_without_its_escape_sequences():
    member = Member(1, b"r1", REMOTE, hello={"host": "evil\x1b]0;pwned\x07\x1b[31mhost\nforged"})
    member.address = "10.0.0.9"
    assert member.where() == "worker 1 (remote, host evilhost forged at 10.0.0.9)"
