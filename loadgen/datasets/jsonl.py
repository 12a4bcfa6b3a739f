"""Reading the JSONL files datasets come in, with errors that name the file and the line."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import orjson


def json_lines(path: str) -> Iterator[tuple[int, Any]]:
    """(line number, parsed value) of each non-blank line of ``path``.

    Raises ValueError naming the path when it cannot be read, and the path and line when a line
    is not JSON.
    """
    try:
        lines = Path(path).read_bytes().splitlines()
    except OSError as exc:
        raise ValueError(f"--dataset-path {path}: {exc.strerror or exc}") from None
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            yield number, orjson.loads(line)
        except orjson.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number}: not valid JSON ({exc})") from None
