"""Reports: a run's records → metrics → the console summary, the result JSON and the plots.

Pure functions of a run's records (``loadgen.records``' ``RunRecords``): no sockets, no clock.
``metrics`` computes upstream's figures, ``summary`` prints its console blocks, ``result_json``
builds and writes its JSON, ``plots`` draws the optional figures, ``verdict`` judges the client
itself, ``probes`` and ``decoding`` turn the probes' and the server's ``/metrics`` figures into
keys and blocks, ``output_lens`` counts each request's output, ``stats`` is the one helper for a
sample's mean/median/std/max/percentiles, ``rows`` the one row and section-title layout of every
console block. ``run_report.build_report`` puts them together for one run, the live one or one
rebuilt from its records file (``offline``). Nothing here imports ``loadgen.run``,
``loadgen.server``, ``loadgen.cli`` or click.
"""
