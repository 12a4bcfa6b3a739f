"""The OpenAI-compatible mock inference server: reproduces a real server's answers, pacing and
connection habits, deterministically, for tests, demos and benchmarks (``loadgen mock-server``).

``config`` says what it does; ``app`` builds and serves it, with the one middleware that counts,
gates and answers refused requests; ``state`` is what the ``handlers`` share; ``bodies`` reads
requests; ``events`` and ``pacing`` render and time a stream; ``recorder`` writes and reads its
timing records; ``personalities`` and ``connections`` hold each server's shapes and habits;
``command`` is its CLI and ``process`` runs it in a child process. The rest of loadgen imports
only ``command``, ``process`` and ``recorder``.
"""
