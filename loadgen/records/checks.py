"""What a records file must hold before anything is built from it.

A records file comes from outside (a crash, a full disk, a copy, a forger), so ``read_records``
believes nothing it says until checked here: the run's start and end are JSON objects whose
fields have ``RunStart``'s and ``RunEnd``'s types, every column has its type, the columns every
file has are there, and the request count agrees with the rows actually in the file. Nothing is
allocated from the file's own claims: at most ``MAX_UNREPORTED`` requests may have no row (a
run that crashed before reporting them), so memory is bounded by the file's size plus that.
Every problem is a ``RecordsFileError`` whose one line names the file and what is wrong.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import json
import types
import typing
from typing import Any

import numpy as np
import pyarrow as pa

from loadgen.records.model import HostUsage, RunEnd, RunStart
from workers.protocol import ConnectionStats

# Requests a file may name without a row for them (a run that crashed early): each costs about
# 225 bytes to read (a forged file claiming 4,000,000 took 896 MB), so a forged count costs at
# most about 450 MB.
MAX_UNREPORTED = 2_000_000
# Columns every records file of format version 1 has; the later ones may be absent.
REQUIRED = (
    "index", "request_id", "worker", "scheduled_ns", "released_ns", "sent_ns", "end_ns",
    "events_ns", "status", "success", "input_tokens", "prompt_tokens", "completion_tokens",
    "input_sequences", "connect_ns", "resent", "server_queue_s", "server_ttft_s", "error", "text",
)  # fmt: skip
# Columns read without a null filler: a null there is not a file loadgen wrote.
NOT_NULL = ("index", "scheduled_ns", "events_ns", "input_tokens", "input_sequences")


class RecordsFileError(Exception):
    """A records file that cannot be read; the message names it and says why."""


def parse_json(raw: bytes, what: str, path: str) -> dict[str, Any]:
    """The JSON object ``raw``; RecordsFileError when it is not one."""
    try:
        value = json.loads(raw)
    except (ValueError, UnicodeDecodeError):
        raise RecordsFileError(f"{path}: its {what} is not JSON") from None
    if not isinstance(value, dict):
        raise RecordsFileError(f"{path}: its {what} is not a JSON object")
    return value


def checked_start(meta: dict[str, Any], path: str) -> RunStart:
    """``RunStart`` from the file's start metadata (less ``format``), every field checked."""
    return RunStart(**_fields(RunStart, meta, "run's start", path))


def checked_end(data: dict[str, Any], num_requests: int, path: str) -> RunEnd:
    """``RunEnd`` from the end batch's metadata, every field checked; its output counts must be
    one per request."""
    values = dict(data)
    for name in ("loop_lag_ns", "output_lens"):
        values[name] = _int64_array(values.get(name), name, path)
    values = _fields(RunEnd, values, "run's end", path)
    values["connection_stats"] = ConnectionStats(**values["connection_stats"])
    if values.get("host") is not None:
        values["host"] = HostUsage(**values["host"])
    if values.get("num_requests") is not None:  # --duration's blocks: counted at the end
        num_requests = values["num_requests"]
    if len(values["output_lens"]) != num_requests:
        raise RecordsFileError(
            f"{path}: its end counts the output of {len(values['output_lens'])} requests, "
            f"its start says {num_requests}"
        )
    return RunEnd(**values)


def setting_names(config: dict[str, Any], cls: type) -> tuple[list[str], list[str]]:
    """A run's stored settings against ``cls``'s fields: the names it has that ``cls`` lacks
    (a newer loadgen's, or an older one's since removed) and the fields it lacks (added since
    it was written), each sorted."""
    fields = {field.name for field in dataclasses.fields(cls) if field.init}
    return sorted(set(config) - fields), sorted(fields - set(config))


def check_settings(config: dict[str, Any], cls: type, path: str) -> None:
    """Each setting of the run's start a value of ``cls``'s field of its name, as JSON holds it
    (a tuple or a set as a list); unknown names are the caller's to judge."""
    hints = typing.get_type_hints(cls)
    for name, value in config.items():
        if name in hints and not _fits(value, hints[name]):
            raise RecordsFileError(f"{path}: its setting {name} is of the wrong type")


def check_columns(schema: pa.Schema, columns: list[tuple[str, pa.DataType]], path: str) -> None:
    """Every required column there, and every known column of its type."""
    names = set(schema.names)
    if len(names) != len(schema.names):
        raise RecordsFileError(f"{path}: a column appears twice")
    if missing := [name for name in REQUIRED if name not in names]:
        raise RecordsFileError(f"{path}: no column {', '.join(missing)}")
    for name, arrow_type in columns:
        if name in names and schema.field(name).type != arrow_type:
            raise RecordsFileError(
                f"{path}: column {name} is {schema.field(name).type}, not {arrow_type}"
            )


def check_rows(table: pa.Table, index: np.ndarray, num_requests: int, path: str) -> None:
    """Each row a distinct request of the run, no null where none is written, and at most
    MAX_UNREPORTED requests without a row."""
    for name in NOT_NULL:
        column = table[name]
        listed = pa.types.is_list(column.type)  # events_ns: read.py keeps only its counts
        if column.null_count or (name == "events_ns" and listed and _child_nulls(column)):
            raise RecordsFileError(f"{path}: column {name} has nulls")
    if len(index) and (index.min() < 0 or index.max() >= num_requests):
        raise RecordsFileError(
            f"{path}: a row's request index is outside 0..{num_requests - 1}, the run's requests"
        )
    if num_requests - len(index) > MAX_UNREPORTED:
        raise RecordsFileError(
            f"{path}: its start says {num_requests} requests, but it holds rows for "
            f"{len(index)}; more than {MAX_UNREPORTED} requests without a row is not a run "
            "loadgen wrote"
        )
    # A count per request (bounded above: the rows and MAX_UNREPORTED), not a sort.
    if len(index) and np.bincount(index, minlength=num_requests).max() > 1:
        raise RecordsFileError(f"{path}: a request has more than one row")


def check_event_nulls(column: pa.ChunkedArray, path: str) -> None:
    """No null token event inside the events_ns lists."""
    if _child_nulls(column):
        raise RecordsFileError(f"{path}: column events_ns has nulls")


def _child_nulls(column: pa.ChunkedArray) -> int:
    # A child without a null (no validity bitmap: loadgen writes none) is not read at all.
    return sum(chunk.flatten().null_count for chunk in column.chunks if chunk.values.null_count)


def _int64_array(text: Any, name: str, path: str) -> np.ndarray:
    """An integer array stored as base64 of its little-endian bytes."""
    try:
        raw = base64.b64decode(text, validate=True) if isinstance(text, str) else None
    except (binascii.Error, ValueError):
        raw = None
    if raw is None or len(raw) % 8:
        raise RecordsFileError(f"{path}: its run's end has no readable {name}")
    return np.frombuffer(raw, dtype="<i8").astype(np.int64)


def _fields(cls: type, values: dict[str, Any], what: str, path: str) -> dict[str, Any]:
    """``values`` as ``cls``'s fields: none unknown, none required missing, each of its type."""
    fields = {field.name: field for field in dataclasses.fields(cls)}
    if unknown := sorted(set(values) - set(fields)):
        raise RecordsFileError(
            f"{path}: its {what} has fields this loadgen does not know: {', '.join(unknown)}"
        )
    hints = typing.get_type_hints(cls)
    for name, field in fields.items():
        if name not in values:
            if field.default is dataclasses.MISSING:
                raise RecordsFileError(f"{path}: its {what} has no {name}")
            continue
        if not _fits(values[name], hints[name]):
            raise RecordsFileError(f"{path}: its {what} has a {name} of the wrong type")
    return dict(values)


def _fits(value: Any, hint: Any) -> bool:
    """``value`` (from JSON) is of the type ``hint``; a dataclass is a JSON object of its
    fields."""
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, arg) for arg in typing.get_args(hint))
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is np.ndarray:
        return isinstance(value, np.ndarray)
    if origin in (list, frozenset) or hint in (list, frozenset):  # a set: a sorted list
        (item,) = typing.get_args(hint) or (Any,)
        return isinstance(value, list) and all(_fits(v, item) for v in value)
    if origin is tuple:  # a list in JSON: tuple[X, ...] or a fixed tuple[X, Y]
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return isinstance(value, list) and all(_fits(v, args[0]) for v in value)
        return (
            isinstance(value, list)
            and len(value) == len(args)
            and all(_fits(v, a) for v, a in zip(value, args, strict=True))
        )
    if origin is dict or hint is dict:
        key, item = typing.get_args(hint) or (Any, Any)
        return isinstance(value, dict) and all(
            _fits(k, key) and _fits(v, item) for k, v in value.items()
        )
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, dict):
            return False
        fields = {field.name: field for field in dataclasses.fields(hint)}
        hints = typing.get_type_hints(hint)
        return set(value) <= set(fields) and all(
            _fits(value[name], hints[name])
            if name in value
            else field.default is not dataclasses.MISSING
            for name, field in fields.items()
        )
    return False
