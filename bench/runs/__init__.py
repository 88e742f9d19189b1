"""The run store: one folder per run, its files, states, locks, heartbeat, progress and
provenance."""
