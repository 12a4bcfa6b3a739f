"""Upstream's re-alignment of synthetic prompts to the server's tokenizer (reference §5.1).

A ``random`` or ``prefix_repetition`` prompt is text decoded from token ids by the client's
tokenizer; a server with another tokenizer may count it longer. As upstream's
``_align_prompts_to_server_tokenizer``: the first prompt is tokenized by the server's
``/tokenize`` (no special tokens); if its count is the dataset's, nothing changes; otherwise every
prompt the server counts longer is cut to its first ``prompt_len`` server tokens through
``/detokenize``. A server without ``/tokenize`` leaves the prompts as they are.
"""

from __future__ import annotations

import asyncio

import orjson

from loadgen.readiness import ServerError, StartupClient

CONCURRENT_REQUESTS = 64  # as upstream's semaphore


async def align_to_server_tokenizer(
    client: StartupClient, model: str, prompts: list[str], prompt_lens: list[int]
) -> list[str]:
    """The prompts, each cut to its ``prompt_len`` in the server's tokens where it is longer."""
    slots = asyncio.Semaphore(CONCURRENT_REQUESTS)

    async def tokenize(prompt: str) -> list[int]:
        body = {"model": model, "prompt": prompt, "add_special_tokens": False}
        async with slots:
            answer = await client.request(
                "POST", f"{client.server_url}/tokenize", orjson.dumps(body)
            )
        return list(orjson.loads(answer)["tokens"])

    async def detokenize(tokens: list[int]) -> str:
        body = {"model": model, "tokens": tokens}
        async with slots:
            answer = await client.request(
                "POST", f"{client.server_url}/detokenize", orjson.dumps(body)
            )
        return str(orjson.loads(answer)["prompt"])

    try:
        first = await tokenize(prompts[0])
    except (ServerError, ValueError, KeyError, TypeError):
        print("WARNING: /tokenize unavailable, skipping alignment.")
        return prompts
    if len(first) == prompt_lens[0]:
        return prompts
    print(
        f"WARNING: tokenizer mismatch (server={len(first)}, expected={prompt_lens[0]}), "
        "re-aligning prompts."
    )

    async def fix(prompt: str, length: int) -> str:
        try:
            tokens = await tokenize(prompt)
            return prompt if len(tokens) <= length else await detokenize(tokens[:length])
        except (ServerError, ValueError, KeyError, TypeError):  # as upstream: keep it
            return prompt

    return list(await asyncio.gather(*map(fix, prompts, prompt_lens)))
