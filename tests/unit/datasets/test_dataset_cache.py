"""The dataset cache: its key, its file format (round trip, corrupt and truncated files), its
directory's permissions, concurrent writers and readers, pruning, and when a build uses it."""

from __future__ import annotations

import multiprocessing
import os
import stat
import time
from pathlib import Path

import numpy as np
import pytest
from tokenizers import AddedToken

from loadgen.config import RunConfig
from loadgen.datasets import cache
from loadgen.datasets.cache import (
    CorruptCache,
    cache_dir,
    cache_key,
    cached_build,
    prune,
    read_dataset,
    tokenizer_digest,
    write_dataset,
)
from loadgen.datasets.registry import DATASETS
from loadgen.datasets.sample import sample_dataset_cached
from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.tokenizer import MOCK_MODEL_NAME, LocalTokenizer, load_tokenizer

KEY = "k" * 64
OPTIONS = {"num_prompts": 10, "random_input_len": 64, "random_range_ratio": "0.0", "seed": 0}


def texts_dataset(n: int = 5) -> SampledPrompts:
    """Texts with what a cache must keep byte for byte: NULs, U+FFFD, emoji, an empty one."""
    prompts = [f"prompt {i}: \x00 caf\u00e9 \ufffd \U0001f600 \n" * i for i in range(n)]
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=np.arange(n, dtype=np.int64) * 7,
        output_lens=np.full(n, 3, dtype=np.int64),
        length_mismatches=2,
    )


def assert_same(a: SampledPrompts, b: SampledPrompts) -> None:
    assert a.prompts == b.prompts
    np.testing.assert_array_equal(a.prompt_lens, b.prompt_lens)
    np.testing.assert_array_equal(a.output_lens, b.output_lens)
    assert a.prompt_lens.dtype == b.prompt_lens.dtype == np.int64
    assert a.length_mismatches == b.length_mismatches


# --- the key ---------------------------------------------------------------------------------


def test_the_key_is_stable_and_ignores_option_order():
    again = dict(reversed(list(OPTIONS.items())))
    assert cache_key("random", OPTIONS, "d") == cache_key("random", again, "d")


@pytest.mark.parametrize(
    "change",
    [
        {"dataset": "random-rerank"},
        {"digest": "e"},
        {"num_prompts": 11},
        {"random_input_len": 65},
        {"random_range_ratio": "0.1"},
        {"seed": 1},
    ],
)
def test_the_key_changes_with_each_input(change):
    options = {**OPTIONS, **{k: v for k, v in change.items() if k in OPTIONS}}
    changed = cache_key(change.get("dataset", "random"), options, change.get("digest", "d"))
    assert changed != cache_key("random", OPTIONS, "d")


def test_the_key_changes_with_the_format_version(monkeypatch):
    before = cache_key("random", OPTIONS, "d")
    monkeypatch.setattr(cache, "FORMAT_VERSION", cache.FORMAT_VERSION + 1)
    assert cache_key("random", OPTIONS, "d") != before


def test_the_tokenizer_digest_is_its_content():
    first = tokenizer_digest(LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME)))
    assert first == tokenizer_digest(LocalTokenizer(load_tokenizer(MOCK_MODEL_NAME)))
    changed = load_tokenizer(MOCK_MODEL_NAME)
    changed.add_special_tokens([AddedToken("<|extra|>", special=True)])
    assert tokenizer_digest(LocalTokenizer(changed)) != first
    assert tokenizer_digest(object()) is None  # a server's tokenizer is never cached


def test_the_directory_follows_xdg():
    assert cache_dir({"XDG_CACHE_HOME": "/x"}) == Path("/x/loadgen/datasets")
    assert cache_dir({}) == Path(os.path.expanduser("~")) / ".cache" / "loadgen" / "datasets"


# --- the file --------------------------------------------------------------------------------


def test_texts_round_trip(tmp_path):
    path = tmp_path / "a.lgdata"
    dataset = texts_dataset()
    write_dataset(path, KEY, dataset)
    assert_same(read_dataset(path, KEY), dataset)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_requests_of_several_texts_round_trip(tmp_path):
    path = tmp_path / "a.lgdata"
    dataset = SampledPrompts.of(
        [["q", "d1", "d2"], ["q", ""], ["q\ufffd", "d3"]], [5, 2, 4], [0, 0, 0]
    )
    write_dataset(path, KEY, dataset)
    assert_same(read_dataset(path, KEY), dataset)


def test_the_arrival_generator_continues_where_it_was(tmp_path):
    path = tmp_path / "a.lgdata"
    rng = np.random.RandomState(7)
    rng.randint(0, 100, size=13)
    rng.standard_normal()  # a cached Gaussian is state too
    dataset = SampledPrompts(["a"], np.array([1]), np.array([1]), arrival_rng=rng)
    write_dataset(path, KEY, dataset)
    back = read_dataset(path, KEY).arrival_rng
    assert back is not None and back.gamma(1.0, size=5).tolist() == rng.gamma(1.0, size=5).tolist()


def test_images_or_token_ids_are_not_cached(tmp_path):
    with pytest.raises(ValueError, match="only"):
        write_dataset(tmp_path / "a", KEY, SampledPrompts.of([[1, 2]], [2], [1]))
    with_images = SampledPrompts(["a"], np.array([1]), np.array([1]), mm_contents=[[{}]])
    with pytest.raises(ValueError, match="only"):
        write_dataset(tmp_path / "b", KEY, with_images)
    assert list(tmp_path.iterdir()) == []  # no temporary file left behind


@pytest.mark.parametrize(
    ("spoil", "reason"),
    [
        (lambda data: data[:-1], "truncated"),
        (lambda data: data + b"x", "truncated or extended"),
        (lambda data: data[:-5] + bytes([data[-5] ^ 1]) + data[-4:], "checksum"),
        (lambda data: b"garbage", "not a loadgen dataset"),
        (lambda data: data[:16] + b"x" + data[17:], "unreadable header"),
        (lambda data: b"", "not a loadgen dataset"),
    ],
)
def test_a_spoiled_file_is_refused(tmp_path, spoil, reason):
    path = tmp_path / "a.lgdata"
    write_dataset(path, KEY, texts_dataset())
    path.write_bytes(spoil(path.read_bytes()))
    with pytest.raises(CorruptCache, match=reason):
        read_dataset(path, KEY)


def test_a_file_of_another_key_is_refused(tmp_path):
    path = tmp_path / "a.lgdata"
    write_dataset(path, KEY, texts_dataset())
    with pytest.raises(CorruptCache, match="another format or key"):
        read_dataset(path, "j" * 64)


# --- building through the cache ---------------------------------------------------------------


def counting_build(dataset: SampledPrompts):
    calls = []

    def build() -> SampledPrompts:
        calls.append(1)
        return dataset

    return build, calls


def test_the_second_build_reads_the_first(tmp_path):
    directory = tmp_path / "cache" / "loadgen" / "datasets"
    build, calls = counting_build(texts_dataset())
    first = cached_build(directory, KEY, build)
    second = cached_build(directory, KEY, build)
    assert calls == [1] and not first.from_cache and second.from_cache
    assert_same(first.dataset, second.dataset)
    assert first.notes[0].startswith("Dataset: built in ") and str(directory) in first.notes[0]
    assert second.notes[0].startswith("Dataset: read from the cache in ")
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700
    assert stat.S_IMODE(directory.parent.stat().st_mode) == 0o700


def test_a_corrupt_file_is_rebuilt_with_one_warning(tmp_path):
    build, calls = counting_build(texts_dataset())
    cached_build(tmp_path, KEY, build)
    (path,) = tmp_path.glob("*.lgdata")
    path.write_bytes(path.read_bytes()[:-10])
    outcome = cached_build(tmp_path, KEY, build)
    assert calls == [1, 1] and not outcome.from_cache
    warning = outcome.notes[0]
    assert (
        warning.startswith(f"warning: cached dataset {path} is unusable (") and "\n" not in warning
    )
    assert warning.endswith("building it again")
    assert cached_build(tmp_path, KEY, build).from_cache  # the rebuilt file is whole


def test_a_loose_directory_is_made_private(tmp_path):
    directory = tmp_path / "datasets"
    directory.mkdir(mode=0o755)
    os.chmod(directory, 0o755)
    cached_build(directory, KEY, counting_build(texts_dataset())[0])
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


def test_a_directory_of_another_user_is_not_used(tmp_path, monkeypatch):
    directory = tmp_path / "datasets"
    directory.mkdir(mode=0o700)
    real = os.getuid()
    monkeypatch.setattr(os, "getuid", lambda: real + 1)
    build, calls = counting_build(texts_dataset())
    outcome = cached_build(directory, KEY, build)
    assert calls == [1] and list(directory.iterdir()) == []
    assert outcome.notes == [
        f"warning: dataset cache not used: {directory} is not a directory of this user's"
    ]


def test_a_cache_that_cannot_be_written_still_builds(tmp_path, monkeypatch):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(cache, "write_dataset", full_disk)
    outcome = cached_build(tmp_path, KEY, counting_build(texts_dataset())[0])
    (note,) = outcome.notes
    assert note == f"warning: cannot store the dataset in the cache {tmp_path}: [Errno 28] " + (
        "No space left on device"
    )


def write_repeatedly(directory: str, seed: int, rounds: int) -> None:
    rng = np.random.default_rng(seed)
    for _ in range(rounds):
        n = int(rng.integers(50, 400))  # each writer's files differ in size
        write_dataset(Path(directory) / "same.lgdata", KEY, texts_dataset(n))


def test_concurrent_writers_never_show_a_reader_half_a_file(tmp_path):
    context = multiprocessing.get_context("fork")
    writers = [
        context.Process(target=write_repeatedly, args=(str(tmp_path), seed, 25))
        for seed in range(3)
    ]
    for writer in writers:
        writer.start()
    reads = 0
    while any(writer.is_alive() for writer in writers):
        try:
            dataset = read_dataset(tmp_path / "same.lgdata", KEY)
        except FileNotFoundError:
            continue
        assert dataset.prompts == texts_dataset(len(dataset.prompts)).prompts
        reads += 1
    for writer in writers:
        writer.join()
        assert writer.exitcode == 0
    assert [p.name for p in tmp_path.iterdir()] == ["same.lgdata"]  # no temporary file left
    read_dataset(tmp_path / "same.lgdata", KEY)


def test_pruning_removes_the_least_recently_used_and_stale_temporaries(tmp_path):
    now = time.time()
    for age, name in enumerate(["newest", "middle", "oldest"]):
        path = tmp_path / f"{name}.lgdata"
        path.write_bytes(b"x" * 100)
        os.utime(path, (now - 10 * age, now - 10 * age))
    stale, fresh = tmp_path / ".a.tmp", tmp_path / ".b.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    os.utime(stale, (now - 2 * cache.STALE_TEMP_S, now - 2 * cache.STALE_TEMP_S))
    prune(tmp_path, keep=tmp_path / "oldest.lgdata", limit=250)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        ".b.tmp",
        "newest.lgdata",
        "oldest.lgdata",
    ]


# --- which builds use it ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "cached"),
    [
        ({"dataset_name": "random"}, True),
        ({"dataset_name": "random", "dataset_cache": False}, False),
        ({"dataset_name": "random-rerank", "random_batch_size": 4}, True),
        ({"dataset_name": "prefix_repetition", "prefix_repetition_num_prefixes": 2}, True),
    ],
)
def test_synthetic_datasets_use_the_cache_unless_turned_off(tok, tmp_path, fields, cached):
    config = RunConfig(num_prompts=12, random_input_len=32, **fields)
    first = sample_dataset_cached(config, tok, directory=tmp_path)
    second = sample_dataset_cached(config, tok, directory=tmp_path)
    assert second.from_cache is cached and bool(list(tmp_path.glob("*.lgdata"))) is cached
    assert_same(first.dataset, second.dataset)
    if first.dataset.arrival_rng is not None:  # prefix_repetition hands its generator on
        assert first.dataset.arrival_rng.random() == second.dataset.arrival_rng.random()


def test_a_server_tokenizer_builds_without_the_cache(tok, tmp_path):
    class ServerLike:  # what a server's /tokenize codec offers, without being local
        vocab_size, num_special_tokens, special_ids = tok.vocab_size, 1, tok.special_ids
        encode_batch, decode_batch = tok.encode_batch, tok.decode_batch

    config = RunConfig(num_prompts=3, random_input_len=16)
    outcome = sample_dataset_cached(config, ServerLike(), directory=tmp_path)
    assert outcome.notes == [] and not outcome.from_cache and list(tmp_path.iterdir()) == []


def test_cached_datasets_are_built_from_the_tokenizer_alone():
    for name, dataset in DATASETS.items():
        if dataset.cached:  # no file, no chat template: the key holds all they depend on
            assert dataset.synthetic and dataset.templated == "never", name
