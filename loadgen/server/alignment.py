"""Upstream's re-alignment of synthetic prompts to the server's tokenizer (reference §5.1).

A ``random`` or ``prefix_repetition`` prompt is text decoded from token ids by the client's
tokenizer; a server with another tokenizer may count it longer. As upstream's
``_align_prompts_to_server_tokenizer``: the first prompt is tokenized by the server's
``/tokenize`` (no special tokens); if its count is the dataset's, nothing changes; otherwise every
prompt the server counts longer is cut to its first ``prompt_len`` server tokens through
``/detokenize``.

The calls go through ``loadgen.server.tokenizer``: the request form (vLLM's or llama.cpp's) is
detected by the first call, or taken from a server tokenizer already probed, and used for every
call; broken connections are retried and concurrency follows the server. Unlike upstream's one
"/tokenize unavailable" line, the warnings say what happened: the status the server answered, a
connection that kept breaking, or the job's deadline. A prompt that cannot be aligned is sent as
built, as upstream does.
"""

from __future__ import annotations

import logging

from loadgen.server.client import ServerClient
from loadgen.server.errors import ServerError
from loadgen.server.tokenizer import (
    BuildTimeout,
    ServerCalls,
    ServerTokenizer,
    detect_form,
    gather_or_cancel,
)
from loadgen.terminal import printable

log = logging.getLogger(__name__)

DEFAULT_TIMEOUT_S = 300.0


async def align_to_server_tokenizer(
    client: ServerClient,
    model: str,
    prompts: list[str],
    prompt_lens: list[int],
    *,
    server: ServerTokenizer | None = None,
    timeout_s: float = DEFAULT_TIMEOUT_S,
    progress: bool = False,
) -> list[str]:
    """The prompts, each cut to its ``prompt_len`` in the server's tokens where it is longer."""
    try:
        if server is None:
            calls = ServerCalls(client)
            form, first = await detect_form(calls, model, prompts[0])
            server = ServerTokenizer(calls, model, form)
        else:
            first = await server.tokenize(prompts[0])
    except ServerError as exc:
        log.warning(f"WARNING: {printable(exc)}; skipping alignment.")
        return prompts
    if len(first) == prompt_lens[0]:
        return prompts
    log.warning(
        f"WARNING: tokenizer mismatch (server={len(first)}, expected={prompt_lens[0]}), "
        "re-aligning prompts."
    )
    failures: list[ServerError] = []

    async def fix(prompt: str, length: int) -> str:
        try:
            tokens = await server.tokenize(prompt)
            return prompt if len(tokens) <= length else await server.detokenize(tokens[:length])
        except BuildTimeout:
            raise
        except ServerError as exc:  # as upstream: send it as built
            failures.append(exc)
            return prompt

    server.calls.begin(
        "aligning the prompts to the server's tokenizer",
        timeout_s,
        "the prompts are sent as built",
        progress=progress,
        desc="Aligning prompts to the server's tokenizer",
    )
    try:
        aligned = await gather_or_cancel(list(map(fix, prompts, prompt_lens)))
    except BuildTimeout as exc:
        log.warning(f"WARNING: {printable(exc)}.")
        return prompts
    finally:
        server.calls.end()
    if failures:
        log.warning(
            f"WARNING: {len(failures)} of {len(prompts)} prompts sent as built: "
            f"{printable(failures[-1])}"
        )
    return aligned
