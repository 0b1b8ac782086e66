"""Benchmarks: `make bench` (python -m benchmarks). See benchmarks/__main__.py."""
