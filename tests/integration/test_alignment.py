"""Alignment of random prompts to the server's tokenizer, against small in-process servers in
either request form, and what it says when the server cannot help."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

from fake_tokenizer_server import FakeServer, serving
from tokenizers import Tokenizer

from loadgen.server.alignment import align_to_server_tokenizer
from loadgen.server.client import ServerClient
from loadgen.server.tokenizer import ServerTokenizer
from loadgen.text.tokenizer import PACKAGED_TOKENIZER, load_tokenizer

CLIENT = load_tokenizer("loadgen-mock")
PROMPTS = [
    f"Benchmark prompt {i}: tokenizers that disagree count this sentence differently." * 2
    for i in range(40)
]
LENS = [len(CLIENT.encode(p, add_special_tokens=False).ids) for p in PROMPTS]


def coarse_tokenizer() -> Tokenizer:
    """The packaged tokenizer without most of its merges: it counts every prompt longer."""
    data = json.loads(PACKAGED_TOKENIZER.read_text())
    data["model"]["merges"] = data["model"]["merges"][:500]
    return Tokenizer.from_str(json.dumps(data))


def align(server: FakeServer, *, reuse: bool = False, **kwargs: Any) -> list[str]:
    async def run() -> list[str]:
        async with serving(server):
            client = ServerClient(server.url, {})
            try:
                known = await ServerTokenizer.connect(client, "m", 0, 1) if reuse else None
                server.bodies.clear()
                return await align_to_server_tokenizer(
                    client, "m", PROMPTS, LENS, server=known, **kwargs
                )
            finally:
                await client.close()

    return asyncio.run(run())


def test_a_llama_cpp_server_gets_its_own_form_and_prompts_are_cut(terminal, capsys) -> None:
    server = FakeServer(form="llama.cpp", tokenizer=coarse_tokenizer())
    aligned = align(server)
    out = capsys.readouterr().out
    assert re.search(r"WARNING: tokenizer mismatch \(server=\d+, expected=\d+\), re-aligning", out)
    coarse = server.tokenizer
    assert all(
        len(coarse.encode(text, add_special_tokens=False).ids) <= n + 1
        for text, n in zip(aligned, LENS, strict=True)
    )
    assert aligned != PROMPTS
    tokenize = [b for path, b in server.bodies if path == "/tokenize"]
    detokenize = [b for path, b in server.bodies if path == "/detokenize"]
    assert "prompt" in tokenize[0]  # the one probe in vLLM's form ...
    assert all("content" in b and "prompt" not in b for b in tokenize[1:])  # ... then llama.cpp's
    assert len(detokenize) == len(PROMPTS) and all(set(b) == {"tokens"} for b in detokenize)


def test_a_form_already_detected_is_reused_without_a_probe(terminal, capsys) -> None:
    server = FakeServer(form="llama.cpp", tokenizer=coarse_tokenizer())
    aligned = align(server, reuse=True)
    assert aligned != PROMPTS
    assert all("content" in b for path, b in server.bodies if path == "/tokenize")
    assert "re-aligning prompts" in capsys.readouterr().out


def test_matching_counts_change_nothing_and_print_nothing(terminal, capsys) -> None:
    server = FakeServer(form="vLLM")
    assert align(server) == PROMPTS
    assert capsys.readouterr().out == ""
    assert server.paths() == ["/tokenize"]


def test_no_tokenize_endpoint_says_the_status(terminal, capsys) -> None:
    server = FakeServer(status={"/tokenize": 404})
    assert align(server) == PROMPTS
    out = capsys.readouterr().out.strip()
    assert re.fullmatch(
        r"WARNING: POST http://127\.0\.0\.1:\d+/tokenize answered HTTP 404: nope; "
        r"skipping alignment\.",
        out,
    ), out


def test_a_closed_connection_is_retried_and_said_so(terminal, capsys) -> None:
    server = FakeServer(form="llama.cpp", tokenizer=coarse_tokenizer(), drop_every=9)
    aligned = align(server)
    out = capsys.readouterr().out
    assert re.search(
        r"^connection to http://\S+/(de)?tokenize closed without an answer "
        r"\(server disconnected\): retrying$",
        out,
        re.M,
    ), out
    assert "skipping alignment" not in out and "sent as built" not in out
    assert server.dropped > 0 and aligned != PROMPTS


def test_a_connection_that_never_answers_skips_alignment_saying_why(terminal, capsys) -> None:
    server = FakeServer(drop_every=1)
    assert align(server) == PROMPTS
    out = capsys.readouterr().out
    assert re.search(
        r"^WARNING: connection to http://\S+/tokenize closed without an answer \(server "
        r"disconnected\); tried 5 times; skipping alignment\.$",
        out,
        re.M,
    ), out
    assert "/tokenize unavailable" not in out


def test_a_prompt_the_server_cannot_cut_is_sent_as_built(terminal, capsys) -> None:
    server = FakeServer(tokenizer=coarse_tokenizer(), status={"/detokenize": 400})
    assert align(server) == PROMPTS
    out = capsys.readouterr().out
    assert re.search(r"WARNING: 40 of 40 prompts sent as built: POST \S+ answered HTTP 400", out)


def test_alignment_is_bounded_by_its_timeout(terminal, capsys) -> None:
    server = FakeServer(tokenizer=coarse_tokenizer(), delay_s=0.2)
    assert align(server, timeout_s=0.3) == PROMPTS
    out = capsys.readouterr().out
    assert re.search(
        r"WARNING: aligning the prompts to the server's tokenizer: \d+ calls answered after "
        r"0 s; the prompts are sent as built\.",
        out,
    ), out
