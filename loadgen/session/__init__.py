"""A run: preparation, shard planning, fan-out to the workers, the credit pool, the timed run.

``runner.run`` reads as the list of phases. ``prepare`` builds the model, tokenizer, dataset,
bodies and schedule; ``shards`` splits them among the workers; ``fanout`` starts the worker
processes and collects their records, ``credit_pool`` lends out ``--max-concurrency``;
``timed_run`` and ``progress`` run and show the timed part, ``host_cpu`` measures where the
host's CPUs went meanwhile; ``output_lens`` counts the output.
The report itself is ``loadgen.report``'s.
"""
