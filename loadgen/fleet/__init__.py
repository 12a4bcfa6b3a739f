"""The worker fleet: where workers come from, the channel to them, and the fan-out of a run.

``placement`` builds the run's ``WorkerPool`` from the flags: local processes (started by
``worker_spawn``), workers that join by hand, or Ray actors (``ray_placement``). ``fanout``
is the pool: hello, clocks (``clock_sync``), shards, start, collect, stop, over one ROUTER
socket (``worker_channel``, in a private directory from ``channel_dir``); ``credit_pool``
lends out ``--max-concurrency``, ``screen_records`` screens what workers send, and ``collector``
keeps one record per request. It knows nothing of reports: each batch of records goes to the
collector and the observers the session hands it (``collector.BatchObserver``).
"""
