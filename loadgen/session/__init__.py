"""A run's session: its lifecycle, checks, preparation, shard planning, the timed run, records.

``lifecycle.RunSession`` owns what a run starts and must stop (the mock, the server client, the
worker pools, the stop signals, cancellation and teardown) for single runs, campaigns and
``--dry-run`` alike; ``runner.run`` reads as the list of phases inside it. ``preflight`` checks
the output paths and the open-file limit, ``prepare`` builds the model, tokenizer, dataset,
bodies and schedule; ``shards`` splits them among the workers (the fleet, loadgen.fleet,
starts and runs them); ``timed_run`` and ``progress`` run and show the timed part, with the
records file (``records``), the live view (``live_view``, ``live_figures``) and fail fast
(``fail_fast``) as the fan-out's observers; ``host_cpu`` measures where the host's CPUs went
meanwhile, ``output_lens`` counts the output. A campaign (``campaign``, ``campaign_run``) loops
the timed run over a grid, and ``dry_run`` prints the plan instead. The report itself is
``loadgen.report``'s.
"""
