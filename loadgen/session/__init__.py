"""A run's session: its checks, preparation, shard planning, the timed run, the records file.

``runner.run`` reads as the list of phases. ``preflight`` checks the output paths and the
open-file limit, ``prepare`` builds the model, tokenizer, dataset, bodies and schedule;
``shards`` splits them among the workers (the fleet, loadgen.fleet, starts and runs them);
``timed_run`` and ``progress`` run and show the timed part, with the live view (``live_view``,
``live_figures``) and fail fast (``fail_fast``) beside it, ``host_cpu`` measures where the
host's CPUs went meanwhile; ``records`` writes the records file, ``output_lens`` counts the
output. A campaign (``campaign``, ``campaign_run``) loops the timed run over a grid, and
``dry_run`` prints the plan instead. The report itself is ``loadgen.report``'s.
"""
