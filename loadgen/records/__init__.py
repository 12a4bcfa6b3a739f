"""A run's per-request records, persisted: the single source of every report.

``collected`` is what the workers reported (``Collected``, assembled by ``loadgen.fleet.fanout``);
``model`` is a whole run as the report reads it (``RunRecords``: what the run knew at t0, the
per-request rows, what it knew at the end); ``arrow_file`` writes that as it arrives into an
Arrow IPC file and reads it back (docs/records.md), and ``redact`` keeps secrets out of it.
Nothing here imports ``loadgen.run``, ``loadgen.server``, ``loadgen.cli`` or click.
"""
