"""Benchmarks: scripts that print figures (median, p99, ratios); not pass/fail tests."""
