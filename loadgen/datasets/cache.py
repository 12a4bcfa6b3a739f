"""The dataset cache: a dataset built from the tokenizer alone is stored once and read back by
later runs with the same tokenizer, flags and seed.

Which datasets: those the registry marks ``cached`` (``random``, ``random-rerank``,
``prefix_repetition``), built with a local tokenizer: they are a function of the tokenizer, their
flags and ``--seed``, and cost a decode -> encode pass over every prompt. A server's tokenizer
(``/tokenize``) is never cached: what it answers can change with the server.

The key is the SHA-256 of: the serialized tokenizer (``tokenizer.json`` as loaded), the dataset's
name and every flag its sampler reads (``Dataset.reads``: ``--seed`` among them), ``FORMAT_VERSION``
and the numpy and tokenizers versions, whose random draws and encodings make the prompts.

Where: ``$XDG_CACHE_HOME/loadgen/datasets`` (``~/.cache/loadgen/datasets``), a 0700 directory
that must be the user's own. A file is written to a temporary file in that directory and renamed
over its name (atomic: concurrent runs never read half a file, and the last writer wins). After
a write the oldest files beyond ``MAX_CACHE_BYTES`` in all are removed.

File layout: ``MAGIC``, the header's length (8 bytes, little-endian), the header (JSON: format,
key, counts, the payload's SHA-256, ``length_mismatches``, the arrival generator's state), then
the payload: prompt_lens and output_lens (int64), each text's end in characters (int64), each
request's end in texts (int64; requests of several texts), and all texts as one UTF-8 blob. A
file whose length, checksum, key or format does not match is ignored with one warning line and
built again.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import json
import os
import stat
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import tokenizers

from loadgen.datasets.sampled_prompts import SampledPrompts
from loadgen.text.tokenizer import LocalTokenizer, TokenCodec

FORMAT_VERSION = 1  # bump when what a dataset holds for the same key, or the layout, changes
MAGIC = b"LGDATA\x00\x01"
MAX_CACHE_BYTES = 2 << 30  # the cache's size in all; the oldest files go first
STALE_TEMP_S = 3600.0  # a temporary file older than this was left by a killed run


class CorruptCache(Exception):
    """A cached file cannot be used; the message says why."""


@dataclass(frozen=True)
class CacheOutcome:
    """How a dataset was obtained: read from the cache, built and stored, or built."""

    dataset: SampledPrompts
    notes: list[str]  # one line each, for the console
    from_cache: bool = False
    seconds: float = 0.0  # reading it, or building it


def cache_dir(environ: Mapping[str, str] = os.environ) -> Path:
    """``$XDG_CACHE_HOME/loadgen/datasets``, or ``~/.cache/loadgen/datasets``."""
    base = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "loadgen" / "datasets"


def tokenizer_digest(tokenizer: TokenCodec) -> str | None:
    """SHA-256 of the local tokenizer as serialized; None for a server's tokenizer."""
    if not isinstance(tokenizer, LocalTokenizer):
        return None
    return hashlib.sha256(tokenizer.tokenizer.to_str().encode()).hexdigest()


def cache_key(dataset_name: str, options: Mapping[str, Any], digest: str) -> str:
    """The file name of a dataset: a hash of everything that makes its prompts."""
    described = {
        "format": FORMAT_VERSION,
        "dataset": dataset_name,
        "options": dict(options),
        "tokenizer": digest,
        "numpy": np.__version__,
        "tokenizers": tokenizers.__version__,
    }
    canonical = json.dumps(described, sort_keys=True, default=repr)
    return hashlib.sha256(canonical.encode()).hexdigest()


def cached_build(directory: Path, key: str, build: Callable[[], SampledPrompts]) -> CacheOutcome:
    """The dataset stored under ``key`` in ``directory``, or ``build()``'s, then stored."""
    notes: list[str] = []
    try:
        _own_private_dir(directory)
    except OSError as exc:
        notes.append(f"warning: dataset cache not used: {exc}")
        started = time.perf_counter()
        dataset = build()
        return CacheOutcome(dataset, notes, seconds=time.perf_counter() - started)
    path = directory / f"{key}.lgdata"
    started = time.perf_counter()
    try:
        dataset = read_dataset(path, key)
    except FileNotFoundError:
        pass
    except (CorruptCache, OSError) as exc:
        notes.append(f"warning: cached dataset {path} is unusable ({exc}); building it again")
    else:
        _touch(path)
        elapsed = time.perf_counter() - started
        notes.append(f"Dataset: read from the cache in {elapsed:.2f} s ({path})")
        return CacheOutcome(dataset, notes, from_cache=True, seconds=elapsed)
    started = time.perf_counter()
    dataset = build()
    built_s = time.perf_counter() - started
    try:
        write_dataset(path, key, dataset)
        prune(directory, keep=path)
    except (OSError, ValueError) as exc:  # ValueError: a dataset the format cannot hold
        notes.append(f"warning: cannot store the dataset in the cache {directory}: {exc}")
    else:
        notes.append(f"Dataset: built in {built_s:.2f} s, cached as {path}")
    return CacheOutcome(dataset, notes, seconds=built_s)


def write_dataset(path: Path, key: str, dataset: SampledPrompts) -> None:
    """Store ``dataset`` at ``path`` atomically (a temporary file in its directory, renamed)."""
    if dataset.trace_offsets_s is not None or dataset.mm_contents is not None:
        raise ValueError("only text datasets without trace times or images are cached")
    grouped = bool(dataset.prompts) and not isinstance(dataset.prompts[0], str)
    groups = [prompt if grouped else [prompt] for prompt in dataset.prompts]
    items = [item for group in groups for item in group]
    texts = [item for item in items if isinstance(item, str)]
    if len(texts) != len(items):
        raise ValueError("only datasets of texts are cached")
    blob = "".join(texts).encode("utf-8", "surrogatepass")
    arrays = (
        np.asarray(dataset.prompt_lens, dtype="<i8"),
        np.asarray(dataset.output_lens, dtype="<i8"),
        np.cumsum(np.fromiter(map(len, texts), dtype=np.int64, count=len(texts))).astype("<i8"),
        np.cumsum(np.fromiter(map(len, groups), dtype=np.int64, count=len(groups))).astype("<i8"),
    )
    payload = [array.tobytes() for array in arrays] + [blob]
    digest = hashlib.sha256()
    for part in payload:
        digest.update(part)
    rng = dataset.arrival_rng
    header = {
        "format": FORMAT_VERSION,
        "key": key,
        "requests": len(groups),
        "texts": len(texts),
        "grouped": grouped,
        "text_bytes": len(blob),
        "sha256": digest.hexdigest(),
        "length_mismatches": dataset.length_mismatches,
        "arrival_rng": None if rng is None else _rng_state(rng),
    }
    head = json.dumps(header).encode()
    fd, temporary = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as file:
            file.write(MAGIC + len(head).to_bytes(8, "little") + head)
            for part in payload:
                file.write(part)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def read_dataset(path: Path, key: str) -> SampledPrompts:
    """The dataset stored at ``path`` under ``key``; CorruptCache if it cannot be trusted."""
    data = memoryview(path.read_bytes())
    if bytes(data[: len(MAGIC)]) != MAGIC or len(data) < len(MAGIC) + 8:
        raise CorruptCache("not a loadgen dataset file")
    size = int.from_bytes(data[len(MAGIC) : len(MAGIC) + 8], "little")
    start = len(MAGIC) + 8 + size
    try:
        header = json.loads(bytes(data[len(MAGIC) + 8 : start]))
        requests, count, grouped = header["requests"], header["texts"], header["grouped"]
        expected = start + 8 * (2 * requests + count + requests) + header["text_bytes"]
    except (ValueError, KeyError, TypeError):
        raise CorruptCache("unreadable header") from None
    if header.get("format") != FORMAT_VERSION or header.get("key") != key:
        raise CorruptCache("another format or key")
    if len(data) != expected:
        raise CorruptCache(f"{len(data)} bytes, expected {expected}: truncated or extended")
    payload = data[start:]
    if hashlib.sha256(payload).hexdigest() != header["sha256"]:
        raise CorruptCache("checksum mismatch")
    arrays = []
    offset = 0
    for length in (requests, requests, count, requests):
        arrays.append(np.frombuffer(payload, dtype="<i8", count=length, offset=offset))
        offset += 8 * length
    prompt_lens, output_lens, text_ends, group_ends = arrays
    text = bytes(payload[offset:]).decode("utf-8", "surrogatepass")
    bounds = [0, *text_ends.tolist()]
    if bounds[-1] != len(text):
        raise CorruptCache("text offsets do not match the text")
    texts = [text[lo:hi] for lo, hi in itertools.pairwise(bounds)]
    if grouped:
        edges = [0, *group_ends.tolist()]
        prompts: list[Any] = [texts[lo:hi] for lo, hi in itertools.pairwise(edges)]
    else:
        prompts = texts
    state = header.get("arrival_rng")
    return SampledPrompts(
        prompts=prompts,
        prompt_lens=prompt_lens.astype(np.int64),
        output_lens=output_lens.astype(np.int64),
        length_mismatches=int(header["length_mismatches"]),
        arrival_rng=None if state is None else _rng_from(state),
    )


def prune(directory: Path, keep: Path, limit: int = MAX_CACHE_BYTES) -> None:
    """Remove the least recently used files beyond ``limit`` bytes (never ``keep``) and
    temporary files left by killed runs."""
    now = time.time()
    files = []
    for entry in os.scandir(directory):
        with contextlib.suppress(OSError):
            info = entry.stat(follow_symlinks=False)
            if entry.name.endswith(".tmp"):
                if now - info.st_mtime > STALE_TEMP_S:
                    os.unlink(entry.path)
            elif entry.name.endswith(".lgdata") and stat.S_ISREG(info.st_mode):
                files.append((info.st_mtime, info.st_size, entry.path))
    total = sum(size for _, size, _ in files)
    for _, size, name in sorted(files):
        if total <= limit:
            break
        if name != str(keep):
            with contextlib.suppress(OSError):
                os.unlink(name)
                total -= size


def _own_private_dir(directory: Path) -> None:
    """Create ``directory`` (0700) or check it is the user's own and private; OSError if not."""
    os.makedirs(directory.parent.parent, mode=0o700, exist_ok=True)
    for level in (directory.parent, directory):
        with contextlib.suppress(FileExistsError):
            os.mkdir(level, 0o700)
    info = os.stat(directory, follow_symlinks=False)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise OSError(f"{directory} is not a directory of this user's")
    if stat.S_IMODE(info.st_mode) != 0o700:
        os.chmod(directory, 0o700)


def _touch(path: Path) -> None:
    """Mark ``path`` as just used (pruning removes the least recently used first)."""
    with contextlib.suppress(OSError):
        os.utime(path)


def _rng_state(rng: np.random.RandomState) -> dict[str, Any]:
    state = rng.get_state(legacy=False)
    state["state"] = {"key": state["state"]["key"].tolist(), "pos": int(state["state"]["pos"])}
    return state


def _rng_from(state: dict[str, Any]) -> np.random.RandomState:
    state = dict(state)
    inner = state["state"]
    state["state"] = {"key": np.array(inner["key"], dtype=np.uint32), "pos": inner["pos"]}
    rng = np.random.RandomState()
    rng.set_state(state)
    return rng
