"""Where a run's workers ran: one console line per host, for runs past one machine."""

from __future__ import annotations

from typing import Any


def _host_key(worker: dict[str, Any]) -> tuple[str, str, str]:
    address = worker.get("address") or ""
    ip = address.rsplit(":", 1)[0] if address.count(":") == 1 else address
    node = worker.get("node")
    placement = f"ray node {node[:12]}" if node else str(worker.get("placement"))
    return placement, str(worker.get("host")), ip


def host_lines(hosts: list[dict[str, Any]] | None) -> list[str]:
    """The workers grouped by host with their clock offsets (estimated min-RTT, ± half the
    round trip); nothing for a run whose workers were all local."""
    if not hosts or all(worker.get("placement") == "local" for worker in hosts):
        return []
    groups: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    for worker in hosts:
        groups.setdefault(_host_key(worker), []).append(worker)
    lines = [f"Workers: {len(hosts)} on {len(groups)} hosts (clock offset from the coordinator)"]
    for (placement, host, ip), workers in groups.items():
        where = f"{host} ({placement}{', ' + ip if ip else ''})"
        ids = ",".join(str(w["worker"]) for w in workers)
        offsets = [w for w in workers if w.get("clock_offset_ns") is not None]
        if placement == "local":
            clock = "same clock"
        elif offsets:
            best = min(offsets, key=lambda w: w["clock_uncertainty_ns"])
            clock = (
                f"{best['clock_offset_ns'] / 1e6:+.3f} ms "
                f"± {best['clock_uncertainty_ns'] / 1e6:.3f} ms"
            )
        else:
            clock = "not measured"
        gone = [str(w["worker"]) for w in workers if w.get("lost")]
        lost = f"; lost mid-run: worker {','.join(gone)}" if gone else ""
        lines.append(f"  {where:<40} workers {ids:<8} {clock}{lost}")
    return lines
