"""No answer can exhaust memory, and success means success (issue 27, points 4 and 5), through
the real CLI and workers against a server on 127.0.0.1 that answers, in turn: more text than a
request's cap without usage, one SSE line longer than MAX_EVENT_BYTES, and token events that
are not JSON though their bytes hold ``"choices":[{``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa
from helpers import asyncio_server, only_json, run_in_process

from workers.sse import MAX_EVENT_BYTES
from workers.stream_text import text_cap

HEADERS = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"
)
OUTPUT_LEN = 4  # max_tokens: the output guard is 2 x 4 + 64 = 72 events
TEXT = " " + "y" * 1999  # per token event: 4 of them pass the cap (72 x 64 = 4,608 characters)


def chunk(data: bytes) -> bytes:
    return b"%x\r\n%s\r\n" % (len(data), data)


def token(text: str, prefix: bytes = b"") -> bytes:
    return b"data: " + prefix + json.dumps({"choices": [{"index": 0, "text": text}]}).encode()


@contextmanager
def server() -> Iterator[str]:
    """POST k is answered: k % 3 == 0, four events of 2,000 characters and no usage; 1, one
    line of MAX_EVENT_BYTES + 1 MiB (sent 1 MiB at a time); 2, token events that are not JSON."""
    posts = [0]

    async def answer(writer: asyncio.StreamWriter, k: int) -> None:
        writer.write(HEADERS)
        if k % 3 == 0:
            body = b"".join(token(TEXT) + b"\n\n" for _ in range(OUTPUT_LEN))
        elif k % 3 == 1:
            writer.write(chunk(token("a") + b'\n\ndata: {"choices":[{"index":0,"text":"'))
            for _ in range(MAX_EVENT_BYTES // 2**20 + 1):
                writer.write(chunk(b"x" * 2**20))
                await writer.drain()
            body = b'"}]}\n\n'
        else:
            body = b"".join(token("a", b"chunk ") + b"\n\n" for _ in range(OUTPUT_LEN))
        writer.write(chunk(body + b"data: [DONE]\n\n") + b"0\r\n\r\n")
        await writer.drain()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while line := await reader.readline():
                length = 0
                while (header := await reader.readline()) not in (b"\r\n", b""):
                    if header.lower().startswith(b"content-length:"):
                        length = int(header.split(b":")[1])
                await reader.readexactly(length)
                if b"/completions" not in line:
                    writer.write(b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n")
                    await writer.drain()
                    continue
                posts[0] += 1
                await answer(writer, posts[0] - 1)
        except (ConnectionError, asyncio.CancelledError, asyncio.IncompleteReadError):
            pass

    with asyncio_server(serve) as port:
        yield f"http://127.0.0.1:{port}"


def test_huge_lines_fail_non_json_events_fail_and_kept_text_is_capped(tmp_path: Path) -> None:
    with server() as url:
        proc = run_in_process(
            "--base-url", url, "--model", "loadgen-mock", "--num-prompts", "6", "--workers", "2",
            "--max-concurrency", "1", "--random-input-len", "16",
            "--random-output-len", str(OUTPUT_LEN), "--disable-tqdm", "--no-fail-fast",
            "--save-result", "--save-detailed", "--result-dir", str(tmp_path),
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "Traceback" not in proc.stderr
    result = only_json(tmp_path)
    errors = result["errors"]
    assert (result["completed"], result["failed"]) == (2, 4), errors
    too_large = "EventTooLarge: an SSE event longer than 16 MiB (MAX_EVENT_BYTES)"
    assert sum(e.startswith(too_large) for e in errors) == 2, errors
    assert sum("is not a JSON object" in e for e in errors) == 2, errors
    # The capped text is what was saved and re-tokenised, never more.
    cap = text_cap(2 * OUTPUT_LEN + 64)
    assert result["loadgen"]["text_capped"] == 2
    assert "note: 2 requests sent more text than kept" in proc.stdout
    texts = [t for t in result["generated_texts"] if t.startswith(" y")]
    assert texts == [(TEXT * OUTPUT_LEN)[:cap]] * 2
    (records_path,) = tmp_path.glob("*.records.arrow")
    table = pa.ipc.open_file(str(records_path)).read_all()
    rows = zip(table["text"].to_pylist(), table["text_capped"].to_pylist(), strict=True)
    assert sorted(text for text, capped in rows if capped) == texts
    assert table["text_capped"].to_pylist().count(True) == 2
    # Re-tokenised from the cap: about one token per character here, 8,000 without the cap.
    lens = sorted(result["output_lens"])
    assert lens[:4] == [0] * 4 and cap // 2 < lens[4] == lens[5] <= cap, lens
