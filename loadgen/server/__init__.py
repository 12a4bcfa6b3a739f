"""Everything the coordinator says to the server outside the workers' timed requests.

One HTTP client (``client``, its failures in ``errors``) sends it all through one path that
reads the whole answer, and one retry helper (``retry``) waits out a server that is still
starting: model discovery (``discovery``), the ready check and warm-ups (``ready``),
``--probe-request-rate``'s probes (``probes``), the Prometheus ``/metrics`` counters read
around the run (``metrics``) and scraped during it with ``--telemetry-url``'s exporters
(``scraper``, the pages parsed and named by ``metric_names``), ``--profile`` (``profile``),
and the server's ``/tokenize`` and ``/detokenize`` as a tokenizer (``tokenizer``, its calls in
flight held by ``adaptive_limit``) with the alignment of prompts to it (``alignment``).
"""
