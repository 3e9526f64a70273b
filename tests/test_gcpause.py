"""The collector pause around bulk reads restores the collector's state, whatever happens inside."""

from __future__ import annotations

import gc

import pytest

from stratamem import Memory
from stratamem._gcpause import gc_paused


def test_pause_restores_on_and_off_and_nests() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # the inner block found it off and leaves it off
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()  # it was off before: it stays off
    finally:
        gc.enable()


def test_pause_restores_after_an_error() -> None:
    with pytest.raises(RuntimeError, match="boom"), gc_paused():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_opening_the_recall_index_leaves_the_collector_on(tmp_path) -> None:
    with Memory(tmp_path / "m.db", embedder=None) as mem:
        mem.add([{"role": "user", "content": "the pottery class is on Tuesday"}], session="s")
    with Memory(tmp_path / "m.db", embedder=None) as mem:  # a fresh process-like open of the stored index
        ctx = mem.context("when is the pottery class?", budget=500)
        assert "pottery class is on Tuesday" in ctx.text
    assert gc.isenabled()
