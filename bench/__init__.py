"""Benchmarks: each prints median / p99 / max next to a baseline measured in the same run."""
