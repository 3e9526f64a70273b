"""Benchmarks (run as scripts; not part of the installed package)."""
