"""loadgen worker processes: send pre-built requests on schedule and stream timing records back."""
