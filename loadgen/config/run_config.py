"""`RunConfig`: everything `loadgen run` was asked to do, one field per flag.

The fields are declared in the sections (loadgen/config/sections/: the server, the dataset, the
traffic, the output, the report), each by its flag; RunConfig inherits them all, so a field
reads flat (``config.request_rate``). Its methods come from ``RunConfigBase`` (what the fields
imply) and ``Validated`` (validate() and the warnings). ``given`` is the one field that is no
flag: the flags given on the command line.

Frozen: nothing changes a config once it is made; a run that learns a value (the mock's URL,
the model) makes a new one with ``dataclasses.replace``.
"""

from __future__ import annotations

import dataclasses

from loadgen.backends import BACKENDS
from loadgen.config.sections.server import DEFAULT_ENDPOINT
from loadgen.config.validation import Validated


@dataclasses.dataclass(frozen=True, kw_only=True)
class RunConfig(Validated):
    """Everything `loadgen run` was asked to do: a field per flag of RUN_FLAGS, named and
    typed as its section declares it (--header: headers), with its defaults; ``given``: the
    flags given on the command line. --input-len and --output-len, when set, are copied into
    the fields they set on construction."""

    # The flags (their names, "--seed") given on the command line, from click's parameter
    # source; the warnings read it. Empty for a config built in Python.
    given: frozenset[str] = dataclasses.field(default=frozenset(), repr=False)

    def __post_init__(self) -> None:
        """As the base's; and without --endpoint, the backend's own endpoint: upstream refuses
        `--backend openai-chat` with its default /v1/completions, so taking
        /v1/chat/completions makes no valid command mean something else (docs/compat.md)."""
        super().__post_init__()
        own = BACKENDS[self.backend].endpoint if self.backend in BACKENDS else None
        if own and "--endpoint" not in self.given and self.endpoint == DEFAULT_ENDPOINT:
            object.__setattr__(self, "endpoint", own)
