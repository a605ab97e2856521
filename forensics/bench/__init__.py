"""The benchmark: the verify-step canary, the user's step, telemetry during the run."""
