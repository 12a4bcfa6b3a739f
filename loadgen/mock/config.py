"""What the mock server does: its options, as one dataclass."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from loadgen.text.tokenizer import MOCK_MODEL_NAME


@dataclass
class MockConfig:
    """Behaviour of the mock server."""

    model: str = MOCK_MODEL_NAME
    tokenizer: str = MOCK_MODEL_NAME
    ttft_ms: float = 0.0
    itl_ms: float = 0.0
    output_len: int = 128  # the length a response has when the "model" stops by itself
    startup_delay_s: float = 0.0
    error_rate: float = 0.0
    seed: int = 0
    max_model_len: int = 131072
    record_timings: Path | None = None  # where the timing records go at shutdown
    unavailable_for_s: float = 0.0  # after the port opens, answer 503 for this long
    empty_model_list: bool = False  # /v1/models lists no model, like a gateway without backends
    personality: str = "vllm"  # the real server whose answers and habits are reproduced
    keepalive_timeout_s: float | None = None  # idle connections close after this; None: the
    # personality's (NO_IDLE_TIMEOUT_S for a server that never closes them)
    http_threads: int | None = None  # connection handlers; 0: unbounded; None: the personality's
    lora_names: tuple[str, ...] = ()  # LoRA adapters served besides the model
    embedding_dim: int = 384  # floats per vector answered by /v1/embeddings and /pooling
    spec_decode_draft_tokens: int = 0  # >0: /metrics counts drafts of this many tokens
