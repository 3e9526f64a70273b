"""Pause Python's cyclic garbage collector around a bulk read.

Opening the recall index of a large namespace makes a few hundred thousand
small tuples (one per row read) that all live on. Each one counts towards
the collector's thresholds, so the collector runs full passes over every
tracked object while they are being made: at 100k turns three full passes
took ~0.9 of a 2.4 s first query (``benchmarks/first_query.py``). Nothing in
such a read makes reference cycles, so pausing the collector loses nothing;
reference counting still frees everything as usual, and the collector
resumes (with its counts as they are) when the block ends.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["gc_paused"]


@contextmanager
def gc_paused() -> Iterator[None]:
    """Run the block with the cyclic collector off, then restore its previous state.

    Nested or concurrent uses are safe: only the outermost one that found the
    collector on turns it back on.
    """
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()
