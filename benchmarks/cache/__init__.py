"""Prompt-cache benchmark parts (issue 26): request serialization, provider cache billing, replays.

``benchmarks/cache_bench.py`` is the entry point; see its docstring.
"""
