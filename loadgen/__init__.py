"""loadgen coordinator: CLI, configuration, datasets, schedule, fan-out and reports."""

__version__ = "0.1.0"
