"""Analyses over runs: fair tuning, regression checks, ablations."""
