"""A dataset build's progress: the synthetic datasets count their prompts as they are encoded (or
built, for prefix_repetition), end at ``(total, total)``, and build the same prompts whether or not
anyone watches."""

from __future__ import annotations

import numpy as np
import pytest

from loadgen.config import RunConfig
from loadgen.datasets import to_target
from loadgen.datasets.random import allowed_ids
from loadgen.datasets.sample import sample_dataset_cached
from loadgen.datasets.sampled_prompts import SampledPrompts


class Recorded:
    """A progress that keeps every report."""

    def __init__(self) -> None:
        self.calls: list[tuple[int, int]] = []

    def __call__(self, done: int, total: int) -> None:
        self.calls.append((done, total))


def assert_counts_up_to(calls: list[tuple[int, int]], total: int, at_least: int) -> None:
    assert len(calls) >= at_least
    assert {t for _, t in calls} == {total}
    done = [d for d, _ in calls]
    assert done == sorted(done) and done[0] >= 0 and done[-1] == total


def assert_same(a: SampledPrompts, b: SampledPrompts) -> None:
    assert a.prompts == b.prompts
    np.testing.assert_array_equal(a.prompt_lens, b.prompt_lens)
    np.testing.assert_array_equal(a.output_lens, b.output_lens)


@pytest.mark.parametrize(
    ("fields", "total", "steps"),
    [
        # 300 prompts in chunks of PROGRESS_MIN_CHUNK (64): 5 steps in the first round alone.
        ({"dataset_name": "random", "num_prompts": 300}, 300, 5),
        # The query and 40 documents, settled together.
        ({"dataset_name": "random-rerank", "num_prompts": 40, "random_batch_size": 4}, 41, 1),
        ({"dataset_name": "prefix_repetition", "num_prompts": 30}, 30, 30),
    ],
)
def test_a_synthetic_build_counts_its_prompts(tok, tmp_path, fields, total, steps) -> None:
    config = RunConfig(random_input_len=48, dataset_cache=False, **fields)
    progress = Recorded()
    watched = sample_dataset_cached(config, tok, directory=tmp_path, progress=progress)
    assert_counts_up_to(progress.calls, total, steps)
    assert_same(watched.dataset, sample_dataset_cached(config, tok, directory=tmp_path).dataset)


def test_a_build_read_from_the_cache_counts_nothing(tok, tmp_path) -> None:
    config = RunConfig(num_prompts=20, random_input_len=16)
    sample_dataset_cached(config, tok, directory=tmp_path)
    progress = Recorded()
    assert sample_dataset_cached(config, tok, directory=tmp_path, progress=progress).from_cache
    assert progress.calls == []


def test_the_whole_text_loop_counts_too(tok) -> None:
    """The loop for tokenizers whose encoding is not shown local (a server's, most others)."""
    ids = allowed_ids(tok)
    lists = [ids[i * 7 : i * 7 + 40] for i in range(150)]
    targets = np.full(len(lists), 40)
    progress = Recorded()
    watched = to_target.whole_rounds(tok, lists, targets, np.random.default_rng(1), progress)
    unwatched = to_target.whole_rounds(tok, lists, targets, np.random.default_rng(1))
    assert_counts_up_to(progress.calls, len(lists), 3)  # 150 lists: 64, 128, 150
    assert watched[0] == unwatched[0]
    np.testing.assert_array_equal(watched[1], unwatched[1])


def test_first_round_steps_cover_every_text_once() -> None:
    texts = [f"t{i}" for i in range(130)]
    batches: list[list[str]] = []

    def encode(batch: list[str]) -> list[str]:
        batches.append(batch)
        return batch  # a text "encodes" to its characters

    progress = Recorded()
    assert to_target.first_encodings(encode, texts, progress) == texts
    assert [len(b) for b in batches] == [64, 64, 2]
    assert progress.calls == [(64, 130), (128, 130), (130, 130)]
    batches.clear()
    assert to_target.first_encodings(encode, texts, None) == texts
    assert len(batches) == 1
