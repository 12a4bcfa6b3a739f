"""The run's records: its start, the records file written as it goes, and its end.

``run_start`` says what the run knows before t0; ``records_writer`` opens the records file
(``--save-records``, on by default with ``--save-result``); ``run_records`` puts the start,
what the workers reported and the end together as the ``RunRecords`` every report reads.
"""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import Sequence
from dataclasses import asdict, replace

import numpy as np

from loadgen import __version__
from loadgen.audio import audio_seconds
from loadgen.backends import input_sequences
from loadgen.config import RunConfig
from loadgen.fleet.collector import BatchObserver, RecordBatch
from loadgen.records.arrow_file import RecordsWriter, move, records_path
from loadgen.records.collected import Collected
from loadgen.records.environment import environment
from loadgen.records.event_source import ArrayEvents, EventSource
from loadgen.records.events import RequestOrderEvents, temporary_records_path
from loadgen.records.model import HostUsage, RunEnd, RunRecords, RunStart
from loadgen.records.read import server_metrics_of
from loadgen.records.read_back import read_back, with_rows
from loadgen.records.redact import redact_argv, redact_config
from loadgen.records.server_series import MetricSeries
from loadgen.records.turns import intended_ns
from loadgen.report.probes import ProbeResults
from loadgen.report.result_json import result_path
from loadgen.report.settings import output_of, settings_of
from loadgen.schedule import schedule_hash
from loadgen.session.prepare import Prepared

log = logging.getLogger(__name__)

# A run's records file writes the batches that come within this of each other as one
# (loadgen/records/arrow_file.py says why): a crash loses at most this much of the run.
WRITE_EVERY_S = 1.0


def saves_records(config: RunConfig) -> bool:
    """--save-records, or by default whenever a result file is written."""
    if config.save_records is not None:
        return config.save_records
    return config.save_result or config.append_result


def run_start(
    config: RunConfig, prepared: Prepared, num_workers: int, counters_before: str | None
) -> RunStart:
    """What the run knows before t0 (t0 itself and the open connections come at START)."""
    return RunStart(
        loadgen_version=__version__,
        command_line=redact_argv(sys.argv),
        config=redact_config(asdict(config)),
        model_id=prepared.model_id,
        tokenizer_id=prepared.tokenizer_id,
        num_requests=prepared.num_requests,
        num_workers=num_workers,
        connections=0,
        schedule_sha256=schedule_hash(prepared.scheduled_ns),
        t0_ns=0,
        t0_wall="",
        counters_before=counters_before,
        environment=environment(__version__),
    )


def records_writer(
    config: RunConfig, prepared: Prepared, start: RunStart, date: str
) -> RecordsWriter | None:
    """The records file's writer: named as the result file would be now when records are
    saved (``finish_records`` renames it to the result file's name after the run), else a
    temporary file that holds the token events while the run goes and is removed at its end
    (None when no temporary file can be made: the run keeps its events in memory then)."""
    saved = saves_records(config)
    if saved:
        path = records_path(
            result_path(settings_of(config), output_of(config), prepared.model_id, date)
        )
    else:
        try:
            path = temporary_records_path()
        except OSError as exc:
            log.warning(f"warning: no temporary records file ({exc}): token events stay in memory")
            return None
    return RecordsWriter(
        path,
        start,
        prepared.scheduled_ns,
        prepared.dataset.prompt_lens,
        _input_sequences(config, prepared),
        config.request_id_prefix,
        prepared.turns.frame(np.arange(prepared.num_requests)) if prepared.turns else None,
        audio_seconds(prepared.dataset.audios),
        temporary=not saved,
        write_every_s=WRITE_EVERY_S,
    )


def run_end(
    collected: Collected,
    output_lens: np.ndarray,
    counters_after: str | None,
    probes: ProbeResults | None,
    host: HostUsage | None = None,
) -> RunEnd:
    """What the run knows when it has ended."""
    return RunEnd(
        interrupted=collected.interrupted,
        worker_problems=collected.worker_problems,
        worker_cpu_ns=collected.worker_cpu_ns,
        worker_wall_ns=collected.worker_wall_ns,
        connection_stats=collected.connection_stats,
        loop_lag_ns=collected.loop_lag_ns,
        output_lens=output_lens,
        counters_after=counters_after,
        probe_latencies_s=probes.latencies_s if probes is not None else None,
        probe_failures=probes.failures if probes is not None else 0,
        host=host,
        hosts=collected.hosts,
    )


def run_records(
    config: RunConfig,
    prepared: Prepared,
    start: RunStart,
    collected: Collected,
    end: RunEnd,
    server_metrics: list[MetricSeries] | None = None,
    writer: RecordsWriter | None = None,
) -> RunRecords:
    """The whole run as every report reads it (the records file holds the same); the series
    scraped during it, ``server_metrics``, included. Token events the run did not keep stay
    in ``writer``'s file, read back from it a chunk at a time (RequestOrderEvents) while it is
    there: the report is built before the file is finished; so do the scraped series that
    went to the file as they came (``server_metrics`` None)."""
    events: EventSource = ArrayEvents(collected.event_ns, collected.event_offsets)
    if not collected.events_kept:
        if writer is None:
            raise ValueError("the run kept no token events and has no records file")
        # Where the events lie was noted as the rows were read back (read_rows_back), the
        # batches a full disk kept in memory included.
        assert collected.event_places is not None, "read_rows_back comes first"
        n = len(collected.records)
        events = RequestOrderEvents(writer.path, n, places=collected.event_places)
        if server_metrics is None:  # the scrapers wrote theirs to the file as they came
            chunks = [*collected.file_series, *writer.kept_series]
            server_metrics = server_metrics_of(chunks, writer.path)
    turns = prepared.turns
    scheduled_ns = prepared.scheduled_ns
    if turns is not None:
        scheduled_ns = intended_ns(
            scheduled_ns, collected.records["end_ns"], turns.turn, turns.think_ns
        )
    return RunRecords(
        start=replace(
            start,
            t0_ns=collected.t0_ns,
            t0_wall=collected.t0_wall,
            connections=collected.connections,
        ),
        end=end,
        records=collected.records,
        worker=collected.worker,
        scheduled_ns=scheduled_ns,
        input_tokens=prepared.dataset.prompt_lens,
        input_sequences=_input_sequences(config, prepared),
        event_ns=np.zeros(0, np.int64),
        event_offsets=np.concatenate(([0], np.cumsum(events.counts))).astype(np.int64),
        errors=collected.errors,
        texts=collected.texts,
        conversation=turns.conversation if turns is not None else None,
        turn=turns.turn if turns is not None else None,
        input_audio_s=audio_seconds(prepared.dataset.audios),
        server_metrics=server_metrics,
        events=events,
    )


def read_rows_back(
    collected: Collected, writer: RecordsWriter | None, values: Sequence[str] = ()
) -> None:
    """The run's rows, kept by its records file alone while it ran (and by ``writer``'s
    memory where the file refused them), read back into ``collected`` once it has ended:
    every batch is in, the scrapers' last chunk too; with them the file's ``values``
    columns (``collected.file_values``)."""
    if not collected.rows_in_file:
        return
    if writer is None:
        raise ValueError("the run's rows are in a records file, and it has none")
    writer.flush()  # (ToRecordsFile.end has: every batch is in)
    n = collected.num_requests
    rows = read_back(writer.path, n, writer.kept_rows, writer.kept_events, values)
    with_rows(collected, rows)


def _input_sequences(config: RunConfig, prepared: Prepared) -> np.ndarray:
    """Inputs each request embeds (a pooling batch counts each); 1 per generation request."""
    if prepared.input_sequences is not None:  # --duration's blocks: kept as they went
        return prepared.input_sequences
    if not config.pooling:
        return np.ones(prepared.num_requests, dtype=np.int64)
    prompts = prepared.dataset.prompts
    return np.array([input_sequences(config.backend, p) for p in prompts], dtype=np.int64)


def finish_records(
    writer: RecordsWriter, collected: Collected, end: RunEnd, result_file: str
) -> str | None:
    """Complete the records file and give it the result file's name; its path, or None when
    it could not be written (the writer has warned), or when it was a temporary one (removed)."""
    writer.finish(collected, end)
    if writer.failure is not None or writer.temporary:
        return None
    try:
        return move(writer.path, records_path(result_file))
    except OSError as exc:  # the directory is no longer writable: the file stays as it is
        log.warning(f"warning: records file {writer.path} keeps its name ({exc.strerror or exc})")
        return writer.path


class ToRecordsFile(BatchObserver):
    """The records file as one of the run's observers: each batch written within the
    writer's ``write_every_s`` of its arrival (one timer for the batches of that time, on
    the run's loop)."""

    def __init__(self, writer: RecordsWriter) -> None:
        self.writer = writer
        self.timer: asyncio.TimerHandle | None = None

    def start(self, t0_ns: int, t0_wall: str, connections: int) -> None:
        """The run's start, in the file before its first batch."""
        self.writer.start(t0_ns, t0_wall, connections)

    def batch(self, batch: RecordBatch) -> bool:
        """One batch, written now or with the others of its second (``flush``)."""
        self.writer.write(batch.worker, batch.rows, batch.events, batch.errors, batch.texts)
        if self.writer.pending and self.timer is None:
            self.timer = asyncio.get_running_loop().call_later(
                self.writer.write_every_s, self.flush
            )
        return False

    def flush(self) -> None:
        """The batches of the last ``write_every_s``, written."""
        self.timer = None
        self.writer.flush()

    def end(self) -> None:
        """Every batch is in: the last written."""
        if self.timer is not None:
            self.timer.cancel()
        self.flush()
