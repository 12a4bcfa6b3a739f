"""vLLM's ``sonnet`` dataset: poem lines drawn with --seed, kept when the templated prompt fits."""

from __future__ import annotations

import random

import pytest

from loadgen.datasets.sonnet import BASE_PROMPT, sample_sonnet_requests
from loadgen.text.chat_template import load_chat_template

LINES = [f"{' '.join(['the'] * (3 + i % 5))} line\n" for i in range(40)]


@pytest.fixture(scope="module")
def render():
    return load_chat_template("loadgen-mock").render_user_prompt


def upstream_sonnet(tok, render, n, input_len, prefix_len, seed):
    """A transcription of upstream's SonnetDataset.sample on the global generator."""

    def count(text):
        return len(tok.encode_batch([text])[0]) + tok.num_special_tokens

    avg_len = sum(count(line) for line in LINES) / len(LINES)
    base_offset = count(render(BASE_PROMPT))
    num_input_lines = round((input_len - base_offset) / avg_len)
    num_prefix_lines = max(round((prefix_len - base_offset) / avg_len), 0)
    prefix_lines = LINES[:num_prefix_lines]
    random.seed(seed)
    samples = []
    while len(samples) < n:
        extra = random.choices(LINES, k=num_input_lines - num_prefix_lines)
        prompt = f"{BASE_PROMPT}{''.join(prefix_lines + extra)}"
        formatted = render(prompt)
        if count(formatted) <= input_len:
            samples.append((prompt, formatted, count(formatted)))
    return samples


@pytest.mark.parametrize("templated", [True, False])
def test_prompts_are_upstreams_for_the_seed(tok, render, templated):
    ds = sample_sonnet_requests(LINES, tok, render, 12, 120, 40, 9, 3, send_templated=templated)
    expected = upstream_sonnet(tok, render, 12, 120, 40, 3)
    assert ds.prompts == [f if templated else p for p, f, _ in expected]
    assert ds.prompt_lens.tolist() == [length for _, _, length in expected]
    assert all(length <= 120 for length in ds.prompt_lens)
    assert ds.output_lens.tolist() == [9] * 12
    assert all(p.startswith(BASE_PROMPT + LINES[0]) for p, _, _ in expected)  # the prefix lines


def test_an_input_length_the_base_prompt_does_not_fit_is_refused(tok, render):
    with pytest.raises(ValueError, match=r"--sonnet-input-len \(5\) must be higher than"):
        sample_sonnet_requests(LINES, tok, render, 1, 5, 0, 9, 0, send_templated=True)
    # One 20-token line: 13 tokens of room round up to one line, which never fits. Upstream
    # would draw forever.
    long_line = [" ".join(["the"] * 19) + " x\n"]
    base = len(tok.encode_batch([render(BASE_PROMPT)])[0]) + tok.num_special_tokens
    with pytest.raises(ValueError, match="only 0 prompts fit"):
        sample_sonnet_requests(long_line, tok, render, 1, base + 13, 0, 9, 0, True)
