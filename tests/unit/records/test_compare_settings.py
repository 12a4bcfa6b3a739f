"""`loadgen compare`: a warning naming each traffic flag whose value differs between the runs
(secrets as ***), and ``-`` for a figure a side does not have, never ``nan``."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.ipc as ipc
from click.testing import CliRunner
from test_records_file import start, write_run

from loadgen.cli.compare import compare_command
from loadgen.records.arrow_file import START_KEY
from loadgen.records.model import RunRecords
from loadgen.report.compare import Samples, compare, setting_differences, table_lines


def run_with(**config: object) -> RunRecords:
    """A run of no request whose config has these fields."""
    base = {"backend": "openai", "headers": {}, "max_concurrency": 8, "random_input_len": 16}
    empty = np.zeros(0, dtype=np.int64)
    return RunRecords(
        start=replace(start(), config={**base, **config}), end=None, records=empty,
        worker=empty, scheduled_ns=empty, input_tokens=empty, input_sequences=empty,
        event_ns=empty, event_offsets=np.zeros(1, np.int64), errors={}, texts={},
    )  # fmt: skip


def test_the_same_settings_say_nothing_even_at_another_address() -> None:
    # A --mock run listens on a random port, and its request-id prefix is random.
    a = run_with(base_url="http://127.0.0.1:4000", request_id_prefix="bench-1-")
    b = run_with(base_url="http://127.0.0.1:5000", request_id_prefix="bench-2-", result_dir="x")
    assert setting_differences([a], [b]) == []


def test_each_differing_traffic_flag_is_named_with_both_values() -> None:
    a = run_with()
    b = run_with(max_concurrency=16, random_input_len=32, percentile_metrics="ttft")
    # --percentile-metrics only shapes the report: not named.
    assert sorted(setting_differences([a], [b])) == [
        "--max-concurrency 8 vs 16",
        "--random-input-len 16 vs 32",
    ]
    # Runs pooled on one side count too.
    assert setting_differences([a, b], [a]) != []


def test_repeats_pair_run_by_run_and_may_draw_from_seeds_of_their_own() -> None:
    # A campaign's repeats: each run's seed derived from --seed, its point and its number.
    a0, a1 = run_with(seed=11), run_with(seed=12)
    assert setting_differences([a0, a1], [run_with(seed=11), run_with(seed=12)]) == []
    assert setting_differences([a0, a1], [run_with(seed=11), run_with(seed=13)]) == [
        "--seed 12 vs 13"
    ]
    assert setting_differences([a0], [run_with(seed=11), run_with(seed=12)]) == [
        "--seed 11 vs 12"  # no base run of its own: against the last
    ]


def test_secrets_are_shown_as_stars() -> None:
    a = run_with(headers={"Authorization": "Bearer sk-one"}, base_url="http://u:pw1@h:1")
    b = run_with(headers={"Authorization": "Bearer sk-two", "x-extra": "sk-three"})
    (line,) = setting_differences([a], [b])
    assert line == '--header {"Authorization": "***"} vs {"Authorization": "***", "x-extra": "***"}'
    assert "sk-" not in line and "pw1" not in line


def empty_side(name: str) -> Samples:
    nothing = np.zeros(0)
    return Samples(name, nothing, nothing, nothing, nothing, np.zeros(1, np.int64), 0.0, 0.0, 1)


def test_a_side_without_a_success_shows_dashes_not_nan() -> None:
    some = Samples(
        "some", np.array([0.01, 0.02]), np.array([0.001]), np.array([0.1, 0.2]),
        np.array([0.001, 0.002]), np.array([0, 1, 2]), 10.0, 100.0, 1,
    )  # fmt: skip
    for base, other in ((some, empty_side("none")), (empty_side("none"), some)):
        lines = table_lines(base, [(other, compare(base, other, resamples=20))])
        text = "\n".join(lines)
        assert "nan" not in text.lower()
        ttft = next(line for line in lines if "mean ttft" in line).split()
        assert "-" in ttft


def test_the_command_warns_once_per_side_and_still_compares(tmp_path: Path) -> None:
    a, b = tmp_path / "a.records.arrow", tmp_path / "b.records.arrow"
    write_run(a)
    write_run(b)
    same = CliRunner().invoke(compare_command, [str(a), str(b), "--resamples", "10"])
    # The files store a few settings only: a note says the others take their defaults.
    assert same.exit_code == 0 and warnings_in(same.stderr) == []
    # The same records under other settings: rewrite b's start.
    reader = ipc.open_file(str(b))
    meta = json.loads(reader.schema.metadata[START_KEY])
    meta["config"]["request_rate"] = 5.0
    meta["config"]["headers"] = {"Authorization": "Bearer sk-secret"}
    schema = reader.schema.with_metadata({START_KEY: json.dumps(meta).encode()})
    batches = [reader.get_batch_with_custom_metadata(i) for i in range(reader.num_record_batches)]
    other = tmp_path / "other.records.arrow"
    with pa.OSFile(str(other), "wb") as sink, ipc.new_file(sink, schema) as out:
        for batch, custom in batches:
            out.write_batch(pa.record_batch(batch.columns, schema=schema), custom_metadata=custom)
    differ = CliRunner().invoke(compare_command, [str(a), str(other), "--resamples", "10"])
    assert differ.exit_code == 0, differ.output
    (warning,) = warnings_in(differ.stderr)
    assert warning.startswith(f"warning: {other} was run with other settings than {a}: ")
    assert "--request-rate inf vs 5.0" in warning
    assert '--header {} vs {"Authorization": "***"}' in warning and "sk-secret" not in warning
    assert "mean ttft (ms)" in differ.stdout


def warnings_in(stderr: str) -> list[str]:
    """The lines of standard error that are not notes."""
    return [line for line in stderr.splitlines() if not line.startswith("note: ")]
