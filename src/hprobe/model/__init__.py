"""Data and its presentation: SMs, outcomes, verdicts, padding tables,
releases, advice, errors. Imports nothing of hprobe's above it."""
