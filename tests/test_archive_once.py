"""Issue 12: a turn's text is stored once. The cold archive references turns the database holds.

Both backends: cold segments expand to their canonical turns, and context,
search, export and forget work as before. SQLite (the backend with an
archive): no archive frame carries text, and forgetting a turn removes its
reference from the frame.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import zstandard
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.errors import ArchiveError, DecodeError
from stratamem.pyramid.archive import Archive, is_reference, reference_record
from stratamem.pyramid.tiers import turn_record
from stratamem.store.open import open_store

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
MARK = "QUOKKA-7731"
CFG = Config().replace(
    pyramid={"micro_chunk_size": 5, "mini_chunk_size": 10, "macro_chunk_size": 20, "warm_max_turns": 10}
)


def _msgs(n: int, marker_at: int = 3) -> list[dict]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": (
                f"The spare key code is {MARK}, keep it safe."
                if i == marker_at
                else f"Message {i}: the Huila lot {i} costs {i * 3} euros."
            ),
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i in range(n)
    ]


@pytest.fixture(params=["sqlite", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    if request.param == "sqlite":
        store = open_store(str(tmp_path / "m.db"))
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "once")))
    m = Memory(store, namespace="t", config=CFG, embedder=None)
    yield m
    m.close()


def _archive_texts(arc: Archive) -> bytes:
    out = b""
    for path in arc.files():
        with zstandard.ZstdDecompressor().stream_reader(path.open("rb"), read_across_frames=True) as r:
            out += r.read()
    return out


def test_a_cold_turn_is_stored_once_and_still_read_by_context_search_export_and_forget(mem: Memory):
    stored = mem.add(_msgs(32))
    [marker] = [s for s in stored if MARK in s.text]
    cold = mem.pyramid.nodes(level=1, tier="cold")
    assert len(cold) == 4
    holder = next(n for n in cold if marker.id in mem.pyramid.turn_ids(n.id))
    for n in cold:
        ids = mem.pyramid.turn_ids(n.id)
        assert [t.id for t in mem.pyramid.expand(n.id)] == ids
        assert mem.pyramid.expand(n.id) == [s for s in stored if s.id in set(ids)]
    arc = mem.pyramid.archive
    if arc is not None:  # SQLite: the frames reference the turns and carry none of their text
        assert all(n.archive_ref is not None for n in cold)
        for n in cold:
            records = arc.read_node(n.archive_ref, n.id)
            assert records == [reference_record(i) for i in mem.pyramid.turn_ids(n.id)]
            assert mem.pyramid.expansion(n.id).sources == {n.id: "archive"}
        assert MARK.encode() not in _archive_texts(arc)
        assert b"Huila" not in _archive_texts(arc)
    assert sum(MARK in t.text for t in mem.turns()) == 1

    ctx = mem.context("spare key code", budget=2000, format="text")
    assert MARK in ctx.text
    # Search ranks the cold turn first and reads its text from the turns table (the archive
    # holds only its id).
    hit = [h for h in mem.search("spare key code", k=5) if h.kind == "turn"][0]
    assert hit.id == f"turn:{marker.id}" and MARK in hit.text
    out = io.StringIO()
    assert mem.export(out)[1] == 32
    assert out.getvalue().count(MARK) == 1

    report = mem.forget(turns=[marker.id])
    assert report.turns == 1
    assert all(MARK not in t.text for t in mem.turns())
    assert mem.pyramid.turn_ids(holder.id) == [i for i in mem.pyramid.turn_ids(holder.id) if i != marker.id]
    for n in mem.pyramid.nodes(level=1, tier="cold"):
        assert [t.id for t in mem.pyramid.expand(n.id)] == mem.pyramid.turn_ids(n.id)
        if arc is not None:
            assert marker.id not in {r["id"] for r in arc.read_node(n.archive_ref, n.id)}
    assert MARK not in mem.context("spare key code", budget=2000, format="text").text


def test_frames_of_the_first_format_with_full_records_are_still_read(tmp_path: Path):
    mem = Memory(tmp_path / "m.db", namespace="t", config=CFG, embedder=None)
    stored = mem.add(_msgs(4))
    full = [turn_record(s) for s in stored[:2]]
    assert not any(is_reference(r) for r in full)
    mixed = full + [reference_record(s.id) for s in stored[2:]]
    assert mem.pyramid.archived_turns(mixed) == stored
    # A reference to a turn the store no longer holds, or a malformed one, is refused.
    with pytest.raises(ArchiveError, match="no longer in the store"):
        mem.pyramid.archived_turns([reference_record(stored[-1].id + 100)])
    with pytest.raises(DecodeError, match="malformed archive reference"):
        mem.pyramid.archived_turns([{"id": "7"}])
    mem.close()


def test_retention_that_purges_turns_leaves_the_cold_content_gone_not_half_there(tmp_path: Path):
    config = CFG.replace(pyramid={"cold_retention_days": 1, "retention_purges_turns": True})
    mem = Memory(tmp_path / "m.db", namespace="t", config=config, embedder=None)
    mem.add(_msgs(32))
    from stratamem.pyramid.retention import apply_retention

    cold = mem.pyramid.nodes(level=1, tier="cold")
    report = apply_retention(mem.pyramid, now=mem.pyramid.clock() + timedelta(days=3))
    assert report.nodes == len(cold) == 4 and report.turns_deleted == 20
    assert mem.pyramid.archive.files() == []
    for n in cold:
        with pytest.raises(ArchiveError, match="deleted by retention"):
            mem.pyramid.expand(n.id)
    mem.close()


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(n=st.integers(min_value=6, max_value=60), chunk=st.integers(min_value=2, max_value=7))
def test_every_cold_frame_references_exactly_its_segments_turns_in_order(
    tmp_path_factory: pytest.TempPathFactory, n: int, chunk: int
) -> None:
    path = tmp_path_factory.mktemp("prop") / "m.db"
    config = Config().replace(
        pyramid={
            "micro_chunk_size": chunk,
            "mini_chunk_size": chunk * 2,
            "macro_chunk_size": chunk * 4,
            "warm_max_turns": chunk,
            "hot_chunks": 1,
        }
    )
    with Memory(path, namespace="t", config=config, embedder=None) as mem:
        mem.add(_msgs(n))
        arc = mem.pyramid.archive
        for node in mem.pyramid.nodes(level=1, tier="cold"):
            ids = mem.pyramid.turn_ids(node.id)
            assert arc.read_node(node.archive_ref, node.id) == [reference_record(i) for i in ids]
            assert [t.id for t in mem.pyramid.expand(node.id)] == ids
        assert b'"turn"' not in _archive_texts(arc)
