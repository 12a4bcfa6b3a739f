"""Network namespaces for tests of runs across hosts: each namespace is a host with only its own
loopback, and a veth pair joins two of them, so nothing a test sends leaves the machine.

Creating them needs root and iproute2 (`ip netns`); ``skip_unless_netns`` says why not when not.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest


def netns_missing() -> str | None:
    """Why this machine cannot make network namespaces for a test (None when it can)."""
    if not hasattr(os, "geteuid") or os.geteuid() != 0:
        return "network namespaces need root (ip netns add)"
    if shutil.which("ip") is None:
        return "network namespaces need iproute2's ip command"
    probe = f"lgprobe{os.getpid()}"
    made = subprocess.run(["ip", "netns", "add", probe], capture_output=True, text=True)
    if made.returncode != 0:
        return f"ip netns add failed here: {made.stderr.strip()}"
    subprocess.run(["ip", "netns", "del", probe], capture_output=True)
    return None


def skip_unless_netns() -> None:
    """Skip the calling test, with the reason, where namespaces cannot be made."""
    if why := netns_missing():
        pytest.skip(why)


def ip(*args: str) -> None:
    """Run ``ip ARGS``; fail the test with ip's message when it fails."""
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    assert done.returncode == 0, f"ip {' '.join(args)}: {done.stderr.strip()}"


def in_ns(namespace: str, *command: str) -> list[str]:
    """``command`` run inside ``namespace``."""
    return ["ip", "netns", "exec", namespace, *command]


@contextmanager
def namespace(name: str) -> Iterator[str]:
    """A fresh namespace with only its loopback up, removed after the block; yields its name,
    ``name`` and this process's id: namespaces are the machine's, and a test session in another
    checkout that made and removed ``name`` too cut this one's hosts off mid-run."""
    name = f"{name}{os.getpid()}"
    subprocess.run(["ip", "netns", "del", name], capture_output=True)
    ip("netns", "add", name)
    try:
        ip("netns", "exec", name, "ip", "link", "set", "lo", "up")
        yield name
    finally:
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@dataclass(frozen=True)
class VethPair:
    """Two namespaces joined by a veth pair: ``a`` at ``a_address``, ``b`` at ``b_address``."""

    a: str
    b: str
    a_address: str
    b_address: str
    b_link: str  # b's end of the pair: set it down to cut b off

    def cut(self) -> None:
        """Cut ``b`` off the network (its end of the pair down)."""
        ip("netns", "exec", self.b, "ip", "link", "set", self.b_link, "down")

    def restore(self) -> None:
        """Join ``b`` again."""
        ip("netns", "exec", self.b, "ip", "link", "set", self.b_link, "up")


@contextmanager
def veth_pair(prefix: str, subnet: str = "10.203.0") -> Iterator[VethPair]:
    """Namespaces ``{prefix}a`` and ``{prefix}b`` (named as ``namespace`` names them) joined by a
    veth pair on ``subnet``.0/24."""
    with namespace(f"{prefix}a") as a, namespace(f"{prefix}b") as b:
        ip(
            "link",
            "add",
            "lgveth0",
            "netns",
            a,
            "type",
            "veth",
            "peer",
            "name",
            "lgveth1",
            "netns",
            b,
        )
        pair = VethPair(a, b, f"{subnet}.1", f"{subnet}.2", "lgveth1")
        for ns, link, address in ((a, "lgveth0", pair.a_address), (b, "lgveth1", pair.b_address)):
            ip("netns", "exec", ns, "ip", "addr", "add", f"{address}/24", "dev", link)
            ip("netns", "exec", ns, "ip", "link", "set", link, "up")
        yield pair
