"""Tokenizer loading: a local tokenizer.json, a Hugging Face model id, or the packaged one.

``TokenCodec`` is what the dataset builder and the report need of a tokenizer. ``LocalTokenizer``
implements it with HF ``tokenizers``; ``loadgen.server.tokenizer.ServerTokenizer`` with the
server's ``/tokenize`` and ``/detokenize``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

import numpy as np
from tokenizers import Tokenizer

from loadgen.text.hub import HubError, hub_file

PACKAGED_TOKENIZER = Path(__file__).resolve().parents[1] / "data" / "tokenizer.json"
# The model name the mock server serves; as a tokenizer name it means the packaged tokenizer.
MOCK_MODEL_NAME = "loadgen-mock"


# One list of token ids; the random datasets build theirs as int64 arrays.
TokenIds = Sequence[int] | np.ndarray


class TokenizerLoadError(Exception):
    """The tokenizer could not be loaded; the message names the culprit."""


class TokenCodec(Protocol):
    """Batched encode and decode, and the vocabulary facts the random dataset needs."""

    vocab_size: int  # the base vocabulary, without added tokens (HF's ``vocab_size``)
    num_special_tokens: int  # special tokens one encode of a single sequence adds (a BOS: 1)
    special_ids: list[int]  # ids the random dataset must not draw

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        ...

    def decode_batch(self, token_lists: Sequence[TokenIds]) -> list[str]:
        """Text of each id list, special tokens kept."""
        ...


class LocalTokenizer:
    """A ``TokenCodec`` over an HF ``tokenizers.Tokenizer`` (batches use every core)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self.vocab_size = base_vocab_size(tokenizer)
        self.num_special_tokens = num_special_tokens_to_add(tokenizer)
        self.special_ids = special_token_ids(tokenizer)

    def encode_batch(self, texts: list[str]) -> list[list[int]]:
        """Token ids of each text, without special tokens."""
        return [e.ids for e in self.tokenizer.encode_batch(texts, add_special_tokens=False)]

    def decode_batch(self, token_lists: Sequence[TokenIds]) -> list[str]:
        """Text of each id list, special tokens kept."""
        # tokenizers reads int arrays as it reads lists; its stub names lists only.
        return self.tokenizer.decode_batch(token_lists, skip_special_tokens=False)  # type: ignore[arg-type]


def load_tokenizer(name_or_path: str) -> Tokenizer:
    """Load a tokenizer from a tokenizer.json file, a directory holding one, or a hub model id.

    Hub ids go through huggingface_hub, so its cache and ``HF_HUB_OFFLINE`` are honoured.
    """
    if name_or_path == MOCK_MODEL_NAME:
        return Tokenizer.from_file(str(PACKAGED_TOKENIZER))
    path = Path(name_or_path).expanduser()
    if path.is_file():
        return _from_file(path)
    if path.is_dir():
        candidate = path / "tokenizer.json"
        if not candidate.is_file():
            raise TokenizerLoadError(f"tokenizer directory {path} holds no tokenizer.json")
        return _from_file(candidate)
    if is_local_path(name_or_path):
        raise TokenizerLoadError(f"tokenizer path {name_or_path} does not exist")
    return _from_hub(name_or_path)


def is_local_path(name_or_path: str) -> bool:
    """Whether a tokenizer name is a filesystem path rather than a hub id."""
    if Path(name_or_path).expanduser().exists():
        return True
    return name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1


def _from_file(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise TokenizerLoadError(f"cannot read tokenizer {path}: {exc}") from None


def _from_hub(repo_id: str) -> Tokenizer:
    try:
        file = hub_file(repo_id, "tokenizer.json")
    except HubError as exc:
        raise TokenizerLoadError(
            f"cannot load tokenizer '{repo_id}': {exc}; pass --tokenizer with a local path"
        ) from None
    if file is None:
        raise TokenizerLoadError(f"cannot load tokenizer '{repo_id}': it has no tokenizer.json")
    return _from_file(file)


def num_special_tokens_to_add(tokenizer: Tokenizer) -> int:
    """How many special tokens encoding a single sequence adds (e.g. 1 for a BOS token)."""
    processor = tokenizer.post_processor
    return processor.num_special_tokens_to_add(False) if processor is not None else 0


def special_token_ids(tokenizer: Tokenizer) -> list[int]:
    """Ids of the added tokens marked special (HF's ``all_special_ids`` for fast tokenizers)."""
    return sorted(i for i, tok in tokenizer.get_added_tokens_decoder().items() if tok.special)


def base_vocab_size(tokenizer: Tokenizer) -> int:
    """The vocabulary size without added tokens, as HF's ``tokenizer.vocab_size``."""
    return tokenizer.get_vocab_size(with_added_tokens=False)
