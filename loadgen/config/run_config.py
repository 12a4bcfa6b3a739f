"""`RunConfig`: everything `loadgen run` was asked to do, one field per flag of the table.

The fields, their types and defaults are built from ``RUN_FLAGS`` (flags.py) by
``dataclasses.make_dataclass``, so a flag is declared once; the methods come from the bases,
``RunConfigBase`` (what the fields imply) and ``Validated`` (validate() and the warnings).
``given`` is the one field that is no flag: the flags given on the command line.
"""

from __future__ import annotations

import dataclasses

from loadgen.config.flags import RUN_FLAGS
from loadgen.config.validation import Validated
from loadgen.flag import config_class

RunConfig = config_class(
    "RunConfig",
    RUN_FLAGS,
    module=__name__,
    bases=(Validated,),
    extra=[
        # The flags (their names, "--seed") given on the command line, from click's parameter
        # source; the warnings read it. Empty for a config built in Python.
        ("given", frozenset[str], dataclasses.field(default=frozenset(), repr=False)),
    ],
    doc="""Everything `loadgen run` was asked to do: a field per flag of RUN_FLAGS, named and
    typed as the table says (--header: headers), with its defaults; ``given``: the flags given
    on the command line. --input-len and --output-len, when set, are copied into the fields
    they set on construction.""",
)
