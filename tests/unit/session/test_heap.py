"""release_freed_heap: glibc's malloc_trim where there is one, nothing elsewhere."""

from __future__ import annotations

import sys

import pytest

from loadgen.session import heap


def test_gives_freed_pages_back_on_glibc() -> None:
    if heap._malloc_trim() is None:
        pytest.skip("no glibc malloc_trim on this platform")
    # Many mid-sized blocks freed at once leave whole free pages below the heap's top: a trim
    # hands at least one of them back, and says so.
    blocks = [bytearray(4096) for _ in range(20_000)]
    keep = blocks[-1]
    del blocks
    assert heap.release_freed_heap() is True
    assert len(keep) == 4096


def test_does_nothing_without_malloc_trim(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(heap, "_malloc_trim", lambda: None)
    assert heap.release_freed_heap() is False


def test_no_trim_off_linux(monkeypatch: pytest.MonkeyPatch) -> None:
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(sys, "platform", "darwin")
    try:
        assert heap._malloc_trim() is None
    finally:
        monkeypatch.undo()
        heap._malloc_trim.cache_clear()
