"""Reports: a run's records → metrics → the console summary, the result JSON and the plots.

Pure functions of what a run collected (``collected``): no sockets, no clock. ``metrics``
computes upstream's figures, ``summary`` prints its console blocks, ``result_json`` builds and
writes its JSON, ``plots`` draws the optional figures, ``verdict`` judges the client itself,
``probes`` and ``decoding`` turn the probes' and the server's ``/metrics`` figures into keys and
blocks, ``stats`` is the one helper for a sample's mean/median/std/max/percentiles, ``rows`` the
one row and section-title layout of every console block, and ``run_report.report_run`` puts them
together for one run. Nothing here imports ``loadgen.run``, ``loadgen.server``, ``loadgen.cli``
or click.
"""
