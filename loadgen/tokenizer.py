"""Tokenizer loading: a local tokenizer.json, a Hugging Face model id, or the packaged one."""

from __future__ import annotations

import os
from pathlib import Path

from tokenizers import Tokenizer

PACKAGED_TOKENIZER = Path(__file__).resolve().parent / "data" / "tokenizer.json"
# The model name the mock server serves; as a tokenizer name it means the packaged tokenizer.
MOCK_MODEL_NAME = "loadgen-mock"


class TokenizerLoadError(Exception):
    """The tokenizer could not be loaded; the message names the culprit."""


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
    if name_or_path.startswith((".", "/", "~")) or name_or_path.count("/") > 1:
        raise TokenizerLoadError(f"tokenizer path {name_or_path} does not exist")
    return _from_hub(name_or_path)


def _from_file(path: Path) -> Tokenizer:
    try:
        return Tokenizer.from_file(str(path))
    except Exception as exc:  # tokenizers raises a bare Exception on a bad file
        raise TokenizerLoadError(f"cannot read tokenizer {path}: {exc}") from None


def _from_hub(repo_id: str) -> Tokenizer:
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, LocalEntryNotFoundError

    offline = os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}
    try:
        file = hf_hub_download(repo_id, "tokenizer.json")
    except LocalEntryNotFoundError:
        how = (
            "HF_HUB_OFFLINE is set and it is not in the cache"
            if offline
            else ("it is not in the Hugging Face cache and the hub cannot be reached")
        )
        raise TokenizerLoadError(
            f"cannot load tokenizer '{repo_id}': {how}; pass --tokenizer with a local path"
        ) from None
    except (HfHubHTTPError, OSError, ValueError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TokenizerLoadError(f"cannot load tokenizer '{repo_id}': {first_line}") from None
    return _from_file(Path(file))


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
