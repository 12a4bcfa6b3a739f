"""End to end: openai-audio uploads from custom_audio and from a local copy of an hf ASR
dataset, through the real CLI (in process), real workers and the mock's audio endpoints; RTFx
in the summary, the JSON and a rebuilt report; the refusals."""

from __future__ import annotations

import io
import json
import math
import wave
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from helpers import cli, only_json, refusal, run_against_mock, run_in_process

from loadgen.mock.handlers.audio import AUDIO_TOKENS_PER_S

AUDIO = ["--backend", "openai-audio", "--endpoint", "/v1/audio/transcriptions"]
SAVED = ["--disable-tqdm", "--save-result", "--save-detailed"]
SECONDS = [1.0, 0.5, 2.5]


def pcm16(seconds: float, rate: int = 16000) -> bytes:
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as out:
        out.setnchannels(1)
        out.setsampwidth(2)
        out.setframerate(rate)
        out.writeframes((np.arange(int(seconds * rate)) % 300).astype("<i2").tobytes())
    return buffer.getvalue()


@pytest.fixture
def custom_audio(tmp_path: Path) -> Path:
    lines = []
    for i, seconds in enumerate(SECONDS):
        (tmp_path / f"{i}.wav").write_bytes(pcm16(seconds))
        line = {
            "prompt": f"Transcribe {i}",
            "audio": str(tmp_path / f"{i}.wav"),
            "output_tokens": i + 2,
        }
        lines.append(json.dumps(line) + "\n")
    (tmp_path / "audio.jsonl").write_text("".join(lines))
    return tmp_path / "audio.jsonl"


def test_custom_audio_uploads_and_reports_rtfx(tmp_path: Path, custom_audio: Path) -> None:
    out = tmp_path / "out"
    args = ["--dataset-name", "custom_audio", "--dataset-path", str(custom_audio)]
    proc = run_in_process(
        "--mock", *AUDIO, *args, "--disable-shuffle", "--num-prompts", "3",
        "--custom-output-len", "-1", *SAVED, "--result-dir", str(out),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(out)
    assert (result["completed"], result["failed"]) == (3, 0)
    assert result["output_lens"] == [2, 3, 4]
    # The mock counted each upload's duration from its WAV header into the prompt's usage.
    assert result["input_lens"] == [math.ceil(s * AUDIO_TOKENS_PER_S) for s in SECONDS]
    assert result["rtfx"] == pytest.approx(sum(SECONDS) / result["duration"])
    assert "RTFx (Inverse Real-Time Factor):" in proc.stdout
    (records,) = out.glob("*.records.arrow")
    rebuilt = cli("report", str(records))
    assert rebuilt.returncode == 0, rebuilt.stderr
    line = next(x for x in proc.stdout.splitlines() if x.startswith("RTFx"))
    assert line in rebuilt.stdout


def test_a_mock_server_process_answers_the_ready_check_warmups_and_run(custom_audio: Path) -> None:
    # The ready check and the warm-ups send the first upload with the run's Content-Type.
    args = ["--dataset-name", "custom_audio", "--dataset-path", str(custom_audio)]
    run = run_against_mock(
        *AUDIO, *args, "--num-prompts", "3", "--num-warmups", "2", "--disable-tqdm",
        "--ready-check-timeout-sec", "30", mock_args=("--output-len", "6"),
    )  # fmt: skip
    assert run.proc.returncode == 0, run.proc.stderr
    assert "Initial test run completed." in run.proc.stdout
    assert "Warmup run completed." in run.proc.stdout and "failed" not in run.proc.stdout
    assert run.stats["requests"]["POST /v1/audio/transcriptions"] == 1 + 2 + 3
    assert run.stats["completion_tokens"] == 6 * 6


def test_custom_audio_goes_in_a_chat_message_with_multimodal_chat(
    tmp_path: Path, custom_audio: Path
) -> None:
    proc = run_in_process(
        "--mock", "--backend", "openai-chat", "--endpoint", "/v1/chat/completions",
        "--enable-multimodal-chat", "--dataset-name", "custom_audio", "--dataset-path",
        str(custom_audio), "--num-prompts", "3", *SAVED, "--result-dir", str(tmp_path / "o"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "o")
    assert (result["completed"], result["rtfx"]) == (3, 0.0)


def test_hf_asr_reads_a_local_copy_within_the_length_bounds(tmp_path: Path) -> None:
    pytest.importorskip("datasets")  # the [hf] extra, installed by the test extra
    rows = [
        {"audio": {"bytes": pcm16(s), "path": f"{i}.wav"}, "text": "t"}
        for i, s in enumerate(SECONDS)
    ]
    (tmp_path / "data").mkdir()
    pq.write_table(pa.Table.from_pylist(rows), tmp_path / "data" / "train-00000-of-00001.parquet")
    proc = run_in_process(
        "--mock", "--backend", "openai-audio", "--endpoint", "/v1/audio/translations",
        "--dataset-name", "hf", "--dataset-path", str(tmp_path), "--hf-name",
        "openslr/librispeech_asr", "--asr-min-audio-len-sec", "0.75", "--asr-max-audio-len-sec",
        "2", "--num-prompts", "3", "--hf-output-len", "4", *SAVED, "--result-dir",
        str(tmp_path / "out"),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = only_json(tmp_path / "out")
    assert (result["completed"], result["output_lens"]) == (3, [4, 4, 4])
    # Only the 1 s clip is within the bounds; the top-up repeats it.
    assert result["input_lens"] == [AUDIO_TOKENS_PER_S] * 3
    assert result["rtfx"] == pytest.approx(3.0 / result["duration"])


def test_audio_refusals_are_one_line(tmp_path: Path, custom_audio: Path) -> None:
    custom = ["--dataset-name", "custom_audio", "--dataset-path", str(custom_audio)]
    for args, message, code in (
        ([*AUDIO], "--backend openai-audio uploads audio: use --dataset-name custom_audio", 2),
        ([*AUDIO, *custom, "--temperature", "0"], "--temperature: Sampling parameters", 2),
        (["--backend", "openai-chat", "--endpoint", "/v1/chat/completions", *custom],
         "--dataset-name custom_audio needs --backend openai-audio", 2),
        # As for every backend, a URL that does not fit is refused when the run starts.
        (["--backend", "openai-audio", "--endpoint", "/v1/completions", *custom],
         "OpenAI Audio API URL must end with", 1),
    ):  # fmt: skip
        proc = refusal("--mock", "--disable-tqdm", *args)
        assert proc.returncode == code, (args, proc.stderr)
        assert message in proc.stderr and "Traceback" not in proc.stderr
    flac = tmp_path / "song.flac"
    flac.write_bytes(b"fLaC" + bytes(64))
    (tmp_path / "flac.jsonl").write_text(json.dumps({"prompt": "p", "audio": str(flac)}) + "\n")
    proc = run_in_process(
        "--mock", *AUDIO, "--dataset-name", "custom_audio", "--dataset-path",
        str(tmp_path / "flac.jsonl"), "--disable-tqdm",
    )  # fmt: skip
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert f"audio file {flac}: not a WAV file" in proc.stderr
