"""What of a worker's RECORDS batch reaches the collector: its own requests, each once.

A batch that decodes (workers/protocol.py ``decode_records``) may still hold rows the coordinator
must not take: a request of another worker's shard or outside the run (a forged or confused
worker), or a request already reported (by an earlier batch, or twice in this one). Taken,
the first overwrites another worker's record, and the second, with fewer events than the first,
lays the events out past their request's slot (IndexError in ``assemble_events``) and the run's
result is lost. ``screen_batch`` removes those rows, their events, errors and texts, and says
why in lines for the channel's capped "dropped" warnings; the first report of a request stands.
"""

from __future__ import annotations

import numpy as np

Decoded = tuple[np.ndarray, np.ndarray, dict[int, str], dict[int, str]]
SHOWN_INDICES = 3  # request indices a warning names


def screen_batch(
    worker: int,
    batch: np.ndarray,
    events: np.ndarray,
    errors: dict[int, str],
    texts: dict[int, str],
    owner: np.ndarray,
    seen: np.ndarray,
) -> tuple[Decoded, list[str]]:
    """``worker``'s batch less the rows it may not report (``owner``: the worker of each
    row's request, -1 outside the run; ``seen``: whether an earlier batch reported it), and
    a line for each kind of row removed."""
    index = batch["index"].astype(np.int64)
    owned = owner == worker
    first = np.zeros(len(index), dtype=bool)
    first[np.unique(index, return_index=True)[1]] = True
    again = owned & (seen | ~first)
    keep = owned & ~again
    kept_indices = set(index[keep].tolist())
    kept_errors = {i: e for i, e in errors.items() if i in kept_indices}
    kept_texts = {i: t for i, t in texts.items() if i in kept_indices}
    if keep.all() and len(kept_errors) == len(errors) and len(kept_texts) == len(texts):
        return (batch, events, errors, texts), []
    why = []
    if (~owned).any():
        why.append(_rows(worker, index[~owned], "requests that are not in its shard"))
    if again.any():
        why.append(_rows(worker, index[again], "requests already reported"))
    stray = (errors.keys() | texts.keys()) - set(index.tolist())
    if stray:
        why.append(_rows(worker, np.array(sorted(stray)), "errors or texts of no row in the batch"))
    counts = batch["n_events"].astype(np.int64)
    return (batch[keep], events[np.repeat(keep, counts)], kept_errors, kept_texts), why


def _rows(worker: int, indices: np.ndarray, what: str) -> str:
    shown = ", ".join(str(int(i)) for i in indices[:SHOWN_INDICES])
    more = ", ..." if len(indices) > SHOWN_INDICES else ""
    return f"worker {worker}'s records of {len(indices)} {what} (index {shown}{more})"
