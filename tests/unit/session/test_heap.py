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


def test_a_dataset_build_gives_its_freed_pages_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """build_dataset trims once its build is done, and also when it fails (a --duration run's
    blocks build one after another for hours)."""
    import asyncio

    from loadgen.config import RunConfig
    from loadgen.session import prepare
    from loadgen.text.tokenizer import MOCK_MODEL_NAME, LocalTokenizer, load_tokenizer

    trims: list[int] = []
    monkeypatch.setattr(prepare, "release_freed_heap", lambda: trims.append(1) or True)
    source = prepare.PromptSource(LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME)), None)
    config = RunConfig(
        num_prompts=20, random_input_len=16, random_output_len=4, disable_tqdm=True,
        dataset_cache=False,
    )  # fmt: skip
    dataset, _ = asyncio.run(prepare.build_dataset(config, source, quiet=True))
    assert len(dataset.prompts) == 20 and trims == [1]
    with pytest.raises(prepare.ConfigError):  # --random-input-len too short for the prefix
        bad = RunConfig(num_prompts=2, random_input_len=0, random_prefix_len=0, disable_tqdm=True)
        asyncio.run(prepare.build_dataset(bad, source, quiet=True))
    assert trims == [1, 1]
