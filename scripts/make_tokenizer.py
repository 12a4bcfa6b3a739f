"""Build the small byte-level BPE tokenizer that loadgen ships for --mock and the tests.

The training text is the docstrings of Python's standard library, so the script needs
nothing from the network. The result is shaped like a Llama-3 tokenizer: byte-level BPE,
a begin-of-text token added to every encoding (so ``num_special_tokens_to_add`` is 1, as
with real chat models) and an end-of-text token. Run it from the repository root:

    python scripts/make_tokenizer.py            # writes loadgen/data/tokenizer.json
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import pkgutil
import warnings
from collections.abc import Iterator
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers

BOS = "<|begin_of_text|>"
EOS = "<|end_of_text|>"
DEFAULT_OUT = Path(__file__).resolve().parent.parent / "loadgen" / "data" / "tokenizer.json"
MODULES = [
    "abc", "argparse", "asyncio", "base64", "collections", "concurrent.futures", "contextlib",
    "csv", "dataclasses", "datetime", "decimal", "difflib", "email", "enum", "fractions",
    "functools", "heapq", "http.client", "inspect", "io", "ipaddress", "itertools", "json",
    "logging", "pathlib", "pickle", "random", "re", "shutil", "socket", "statistics", "string",
    "subprocess", "tarfile", "textwrap", "threading", "typing", "unittest", "urllib.parse",
    "uuid", "zipfile",
]  # fmt: skip


def stdlib_docstrings() -> Iterator[str]:
    """Yield the docstrings of a fixed list of stdlib modules and their members."""
    warnings.simplefilter("ignore")
    for name in MODULES:
        module = importlib.import_module(name)
        modules = [module]
        if hasattr(module, "__path__"):
            for info in pkgutil.iter_modules(module.__path__, name + "."):
                if info.name.endswith("__main__"):  # importing it would run the module
                    continue
                try:
                    modules.append(importlib.import_module(info.name))
                except Exception:  # optional submodules (e.g. platform-specific) may not import
                    continue
        for mod in modules:
            if mod.__doc__:
                yield mod.__doc__
            for _, member in inspect.getmembers(mod):
                doc = getattr(member, "__doc__", None)
                if isinstance(doc, str) and len(doc) > 40:
                    yield doc


def build(vocab_size: int) -> Tokenizer:
    """Train the byte-level BPE tokenizer on the stdlib docstrings."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=[BOS, EOS],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(sorted(set(stdlib_docstrings())), trainer=trainer)
    bos_id = tokenizer.token_to_id(BOS)
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{BOS} $A", pair=f"{BOS} $A {BOS} $B", special_tokens=[(BOS, bos_id)]
    )
    return tokenizer


def main() -> None:
    """Train and write the tokenizer."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--vocab-size", type=int, default=8192)
    args = parser.parse_args()
    tokenizer = build(args.vocab_size)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(args.out))
    size = tokenizer.get_vocab_size(with_added_tokens=True)
    print(f"wrote {args.out} ({size} tokens, {args.out.stat().st_size // 1024} KiB)")


if __name__ == "__main__":
    main()
