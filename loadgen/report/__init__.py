"""Reports: a run's records → its summary → the console, the result JSON and the other views.

Pure functions of a run's records (``loadgen.records``' ``RunRecords``): no sockets, no clock.
``summarize`` computes a run's ``RunSummary`` once (its types in ``run_summary``), from
``metrics`` (upstream's figures), ``verdict`` (the client's judgement of itself), ``probes`` and
``decoding`` (the probes' and the server's ``/metrics`` figures) and ``output_lens``;
``metric_table`` declares each figure and latency once, with the views that show it. The views
render the summary: ``summary`` the console blocks, ``result_json`` the JSON (and writes it),
``campaign_summary`` a campaign's rows; ``plots`` draws the optional figures. ``stats`` is the
one helper for a sample's mean/median/std/max/percentiles, ``rows`` the one row and
section-title layout of every console block. ``run_report.build_report`` puts them together for
one run, the live one or one rebuilt from its records file (``offline``). What a report reads of
the run's configuration is its ``Settings`` (and the files it writes, its ``ReportOutput``),
built once by ``settings``, the one module here that imports ``loadgen.config``. Nothing here
imports ``loadgen.session``, ``loadgen.fleet``, ``loadgen.server``, ``loadgen.cli`` or click.
"""
