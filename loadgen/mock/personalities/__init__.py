"""Each real server's answers and habits, for ``loadgen mock-server --personality``: one module
per server, :mod:`~loadgen.mock.personalities.base` being vLLM's, the default."""

from __future__ import annotations

from loadgen.mock.personalities.base import Personality
from loadgen.mock.personalities.llamacpp import LlamaCpp
from loadgen.mock.personalities.openai import OpenAI
from loadgen.mock.personalities.sglang import SGLang
from loadgen.mock.personalities.tgi import TGI

PERSONALITIES: dict[str, Personality] = {
    p.name: p for p in (Personality(), LlamaCpp(), SGLang(), TGI(), OpenAI())
}
