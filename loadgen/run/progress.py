"""What the console shows as the timed run starts and goes: the pacing lines and the bar."""

from __future__ import annotations

from tqdm import tqdm

from loadgen.config import RunConfig


def print_traffic(config: RunConfig) -> None:
    """Upstream's lines on how requests will be paced, printed as the timed run starts."""
    if config.self_timed_trace:
        print("Self timing is set, using the timestamps from the trace file.")
        return
    distribution = "Poisson process" if config.burstiness == 1.0 else "Gamma distribution"
    if config.ramp_up_strategy is not None:
        print(f"Traffic ramp-up strategy: {config.ramp_up_strategy}.")
        print(
            f"Will increase RPS from {config.ramp_up_start_rps} to "
            f"{config.ramp_up_end_rps} RPS over the duration of the benchmark."
        )
    else:
        print(f"Traffic request rate: {config.request_rate}")
    print(f"Burstiness factor: {config.burstiness} ({distribution})")
    print(f"Maximum request concurrency: {config.max_concurrency}")


class Progress:
    """The progress bar, shown from t0 on and advanced as records arrive."""

    def __init__(self, total: int, disabled: bool) -> None:
        self.total = total
        self.disabled = disabled
        self.bar: tqdm | None = None

    def start(self) -> None:
        """Show the bar at t0."""
        if not self.disabled:
            self.bar = tqdm(total=self.total)

    def update(self, finished: int) -> None:
        """Count requests that finished."""
        if self.bar is not None:
            self.bar.update(finished)

    def close(self) -> None:
        """Close the bar."""
        if self.bar is not None:
            self.bar.close()
