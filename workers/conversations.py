"""A worker's conversations (``--multi-turn``): each turn sent after the one before it ended,
with the conversation so far in its body.

The coordinator pins each conversation to one worker and sends its turns in the shard like any
request, plus three numbers per turn (the ``turns`` frame of SHARD): its conversation, its
index in it, and the think time before it. A turn's body is the chat request the coordinator
built, with two markers around the user message in ``messages``::

    {..."messages":["<HISTORY>",{"role":"user",...},"<END>"],...}

The worker cuts there once per turn and sends ``head + history + user + tail``, where the
history is every earlier turn's user message and the assistant's answer as the server produced
it (its streamed text, JSON-escaped once when the turn ends). No JSON is parsed.

Release order: a heap of (due instant, turn). Turn 0 of each conversation is due at its
scheduled instant; a turn that ends well makes the next one due at its end plus the think time;
a turn that fails ends its conversation (its later turns are reported unsent, with the reason).
The dispatcher waits for the heap's first instant on its one timer, so no timer is armed per
turn.
"""

from __future__ import annotations

import heapq

import numpy as np
import orjson

# The strings the coordinator puts around a turn's user message, and how orjson writes them.
HISTORY_TEXT = "\x00loadgen-history\x00"
END_TEXT = "\x00loadgen-end\x00"
HISTORY_MARK = orjson.dumps(HISTORY_TEXT) + b","
END_MARK = b"," + orjson.dumps(END_TEXT)
SESSION_HEADER = "X-Session-ID"


def split_turn_body(body: bytes) -> tuple[bytes, bytes, bytes]:
    """(head, user message, tail) of a turn's body with its markers cut out."""
    head, _, rest = body.partition(HISTORY_MARK)
    user, found, tail = rest.partition(END_MARK)
    if not found:
        raise ValueError("a multi-turn body without its markers")
    return head, user, tail


def assistant_message(text: str) -> bytes:
    """The assistant's message of a finished turn, as JSON."""
    return b'{"role":"assistant","content":' + orjson.dumps(text) + b"}"


class Conversations:
    """The turns of one shard's conversations: which is due, and each conversation's history."""

    def __init__(
        self,
        conversation: np.ndarray,
        turn: np.ndarray,
        think_ns: np.ndarray,
        scheduled_ns: np.ndarray,
        session_prefix: str,
    ) -> None:
        self.conversation = conversation
        self.think_ns = think_ns
        self.session_prefix = session_prefix
        n = len(conversation)
        # The next turn of each turn's conversation in this shard (-1: the last).
        self.next_turn = np.full(n, -1, dtype=np.int64)
        last: dict[int, int] = {}
        for k in np.lexsort((turn, conversation)):
            c = int(conversation[k])
            if c in last:
                self.next_turn[last[c]] = int(k)
            last[c] = int(k)
        firsts = [k for k in range(n) if turn[k] == 0]
        self.due: list[tuple[int, int]] = [(int(scheduled_ns[k]), k) for k in firsts]
        heapq.heapify(self.due)
        self.history: dict[int, bytes] = {}
        self.pending = n  # turns neither released nor ended with their conversation
        self.settled = np.zeros(n, dtype=bool)  # released, or dropped with their conversation

    def next_due_ns(self) -> int | None:
        """The instant (ns after t0) the earliest waiting turn is due; None when none waits."""
        return self.due[0][0] if self.due else None

    def pop(self) -> int:
        """Release the earliest due turn: its index in the shard."""
        self.pending -= 1
        k = heapq.heappop(self.due)[1]
        self.settled[k] = True
        return k

    def never_released(self) -> list[int]:
        """The turns neither sent nor dropped with their conversation: the run stopped first."""
        return np.flatnonzero(~self.settled).tolist()

    def due_count(self, now_ns: int) -> int:
        """Turns waiting whose instant has come (``now_ns`` after t0)."""
        return sum(1 for due_ns, _ in self.due if due_ns <= now_ns)

    def body(self, k: int, sent_body: bytes) -> bytes:
        """Turn k's body with its conversation's history in it."""
        head, user, tail = split_turn_body(sent_body)
        return head + self.history.get(int(self.conversation[k]), b"") + user + tail

    def session(self, k: int) -> str:
        """Turn k's X-Session-ID: its conversation's id."""
        return f"{self.session_prefix}conv-{int(self.conversation[k])}"

    def ended(self, k: int, sent_body: bytes, ok: bool, text: str, end_ns: int) -> list[int]:
        """Turn k ended at ``end_ns`` (after t0): the next turn becomes due, or, when it
        failed, its conversation ends. The turns that will never be sent."""
        nxt = int(self.next_turn[k])
        if nxt < 0:
            return []
        if ok:
            c = int(self.conversation[k])
            _, user, _ = split_turn_body(sent_body)
            self.history[c] = (
                self.history.get(c, b"") + user + b"," + assistant_message(text) + b","
            )
            heapq.heappush(self.due, (end_ns + int(self.think_ns[nxt]), nxt))
            return []
        dropped = []
        while nxt >= 0:
            dropped.append(nxt)
            nxt = int(self.next_turn[nxt])
        self.pending -= len(dropped)
        self.settled[dropped] = True
        self.history.pop(int(self.conversation[k]), None)
        return dropped
