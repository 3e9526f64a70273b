"""Issue 28's leaner layout (``m025_lean_store``): turn vectors in 6 bits, warm views out of ``nodes``.

The codec, the stored sizes, the page fill of the pyramid's tables, and the
upgrade of a store of the previous layout.

Real SQLite files and a real PostgreSQL (pgserver); the documented offline
HashEmbedder at MiniLM's 384 dimensions, so the blobs have their real sizes.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.embed.quantize import (
    decode_int6,
    encode_int6,
    encode_int8,
    int6_blob_size,
    int6_codes,
    int8_codes,
    is_turn_blob,
    turn_codes,
    unit_rows,
)
from stratamem.errors import BackendError
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "six.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "six"))


SMALL_PYRAMID = Config().replace(
    pyramid={
        "micro_chunk_size": 5,
        "mini_chunk_size": 10,
        "macro_chunk_size": 30,
        "hot_chunks": 2,
        "warm_max_turns": 20,
    }
)
_COLUMNS_OF_NODES = {
    "sqlite": "SELECT name FROM pragma_table_info('nodes')",
    "postgres": "SELECT column_name FROM information_schema.columns WHERE table_name = 'nodes' "
    "AND table_schema = current_schema()",
}


def _chat(n: int, day: int = 0) -> list[dict[str, object]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Turn {i}: the harbour crane{i} lifted crate {i * 7 + day} onto the night ferry to Porto{i}.",
            "metadata": {"dia_id": f"D1:{i}", "note": "é ü 日本" * (i % 3)},
        }
        for i in range(n)
    ]


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False, width=32),
        min_size=1,
        max_size=41,
    )
)
def test_six_bit_codes_are_the_rounded_components_over_the_largest(values: list[float]) -> None:
    vec = np.asarray([values], dtype=np.float32)
    [blob] = encode_int6(vec)
    dims = len(values)
    assert len(blob) == int6_blob_size(dims) == (dims + 3) // 4 * 3
    top = float(np.abs(vec).max())
    want = np.zeros(dims) if top == 0 else np.clip(np.rint(vec[0] / np.float32(top) * 31), -31, 31)
    codes = int6_codes([blob], dims)
    assert codes.dtype == np.int8 and codes[0].tolist() == want.astype(int).tolist()
    assert turn_codes([blob], dims).tolist() == codes.tolist()
    # The codes are a fixed point: encoding the decoded vector gives the same blob.
    if float(np.linalg.norm(vec[0].astype(np.float64))) > 1e-30:  # (not a row of denormals)
        assert encode_int6(decode_int6([blob], dims)) == [blob]
        assert float(decode_int6([blob], dims)[0] @ (vec[0] / np.linalg.norm(vec[0].astype(np.float64)))) > 0.99


def test_turn_codes_read_six_bit_and_int8_blobs_together_and_refuse_other_sizes() -> None:
    rng = np.random.default_rng(3)
    vec = rng.normal(size=(6, 384)).astype(np.float32)
    six, eight = encode_int6(vec[:3]), encode_int8(vec[3:])
    assert {len(b) for b in six} == {288} and {len(b) for b in eight} == {388}
    assert all(is_turn_blob(b, 384) for b in six + eight) and not is_turn_blob(None, 384)
    mixed = turn_codes([six[0], eight[0], six[1], eight[1], six[2], eight[2]], 384)
    assert mixed[0::2].tolist() == int6_codes(six, 384).tolist()
    assert mixed[1::2].tolist() == int8_codes(eight, 384).tolist()
    # Rows are normalised one by one: both forms decode to nearly the same unit vector.
    assert (
        np.einsum("ij,ij->i", unit_rows(mixed[0::2]), unit_rows(int8_codes(encode_int8(vec[:3]), 384))) > 0.999
    ).all()
    with pytest.raises(BackendError, match=r"287 bytes, expected 288 \(6-bit\) or 388 \(int8\)"):
        turn_codes([six[0], six[1][:-1]], 384)
    with pytest.raises(BackendError, match="6-bit"):
        int6_codes([six[0] + b"\0"], 384)


def test_a_stored_turn_vector_takes_three_quarters_of_a_byte_per_component(where: str) -> None:
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(384)) as mem:
        mem.add(_chat(30), session="s")
        [(n, total, smallest, largest)] = raw_rows(
            mem.store,
            "SELECT COUNT(vector), SUM(LENGTH(vector)), MIN(LENGTH(vector)), MAX(LENGTH(vector)) FROM recall_index",
        )
    assert (n, total, smallest, largest) == (30, 30 * 288, 288, 288)  # int8 blobs took 388 bytes each


def _as_before_m025(store: Any, vectors: dict[int, bytes]) -> None:
    """Put a store back in the layout before ``m025_lean_store``: int8 turn vectors, warm views in ``nodes``."""
    index = store.embeddings.turns
    index.put("n", [dataclasses.replace(r, vector=vectors[t]) for t, r in index.load("n").items()])
    views = raw_rows(store, "SELECT node_id, format, content FROM node_views")
    raw_rows(store, "ALTER TABLE nodes ADD COLUMN warm_content TEXT")
    raw_rows(store, "ALTER TABLE nodes ADD COLUMN warm_format TEXT")
    for node_id, fmt, content in views:
        raw_rows(store, "UPDATE nodes SET warm_format = %s, warm_content = %s WHERE id = %s", (fmt, content, node_id))
    raw_rows(store, "DROP TABLE node_views")
    raw_rows(store, "DELETE FROM _stratamem_migrations WHERE name = 'm025_lean_store'")


def test_a_store_of_the_previous_layout_upgrades_without_losing_a_byte(where: str) -> None:
    """m025_lean_store: int8 turn vectors re-encoded in 6 bits, warm views moved out of ``nodes`` unchanged."""
    emb = HashEmbedder(384)
    with Memory(open_store(where), namespace="n", config=SMALL_PYRAMID, embedder=emb) as mem:
        for day in range(4):
            mem.add(_chat(12, day), session=f"s{day}")
        before = [dataclasses.astuple(t) for t in mem.store.iter_turns("n")]
        rows = mem.store.embeddings.turns.load("n")
        texts = [t.turn.text for t in mem.store.iter_turns("n")]
        old = dict(zip(sorted(rows), encode_int8(np.asarray(emb.embed_batch(texts), dtype=np.float32)), strict=True))
        views = {int(n): (f, c) for n, f, c in raw_rows(mem.store, "SELECT node_id, format, content FROM node_views")}
        assert len(views) >= 2 and {f for f, _ in views.values()} == {"ctf"}
        nodes = [dataclasses.astuple(n) for n in mem.pyramid.nodes()]
        _as_before_m025(mem.store, old)
        assert {len(r.vector or b"") for r in mem.store.embeddings.turns.load("n").values()} == {388}
    fresh = HashEmbedder(384)
    with Memory(open_store(where), namespace="n", config=SMALL_PYRAMID, embedder=fresh) as mem:  # m025 runs
        assert ("m025_lean_store",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")
        stored = mem.store.embeddings.turns.load("n")
        for tid, blob in old.items():
            assert stored[tid].vector == encode_int6(int8_codes([blob], 384).astype(np.float32))[0]
            assert stored[tid].terms == rows[tid].terms and stored[tid].events == rows[tid].events
        assert [dataclasses.astuple(t) for t in mem.store.iter_turns("n")] == before  # text and metadata exactly
        assert {n: mem.store.nodes.warm_content("n", n) for n in views} == views
        assert [dataclasses.astuple(n) for n in mem.pyramid.nodes()] == nodes
        columns = {str(r[0]) for r in raw_rows(mem.store, _COLUMNS_OF_NODES[mem.store.backend])}
        assert "warm_content" not in columns and "warm_format" not in columns
        for node_id in views:  # a warm segment expands from its own copy, as before
            assert mem.pyramid.expansion(node_id).sources == {node_id: "warm"}
        mem.search("crate 35 ferry", k=3)
        assert {t for c in fresh.calls for t in c} == {"crate 35 ferry"}  # no turn embedded again


def test_warm_views_live_in_their_own_table_and_go_with_their_node(where: str) -> None:
    """A segment's view is a row of ``node_views`` while warm; cold, forgotten or deleted, it is gone."""
    with Memory(open_store(where), namespace="n", config=SMALL_PYRAMID, embedder=None) as mem:
        for day in range(4):
            mem.add(_chat(12, day), session=f"s{day}")
        warm = mem.pyramid.nodes(level=1, tier="warm")
        views = raw_rows(mem.store, "SELECT node_id FROM node_views ORDER BY node_id")
        assert warm and [int(r[0]) for r in views] == [n.id for n in warm]
        assert all(mem.store.nodes.warm_content("n", n.id) is not None for n in warm)
        for node in mem.pyramid.nodes(level=1, tier="cold"):
            assert mem.store.nodes.warm_content("n", node.id) is None
        # Forgetting a turn of a warm segment re-encodes the view without it.
        victim = mem.pyramid.turn_ids(warm[0].id)[0]
        text = next(t.turn.text for t in mem.store.iter_turns("n") if t.id == victim)
        mem.forget(turns=[victim])
        fmt, content = mem.store.nodes.warm_content("n", warm[0].id)
        assert text not in content and fmt == "ctf"
        mem.forget(all_namespace=True)
    with Memory(open_store(where), namespace="m", config=SMALL_PYRAMID, embedder=None) as mem:
        assert raw_rows(mem.store, "SELECT COUNT(*) FROM node_views") == [(0,)]


def test_the_pyramid_tables_fill_their_pages_while_segments_change_tier(tmp_path: Path) -> None:
    """Warm views in ``nodes`` rows made each row grow and shrink: the table's pages were 29 % full."""
    import sqlite3
    from datetime import UTC, datetime, timedelta

    t0 = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)
    path = tmp_path / "fill.db"
    with Memory(str(path), namespace="n", embedder=HashEmbedder(384)) as mem:
        for s in range(30):
            mem.add(
                [
                    {
                        "role": "user" if i % 2 == 0 else "assistant",
                        "content": f"Session {s} turn {i}: Ana talks about the pottery course {i * s}, the kiln "
                        "schedule, and her cat Pim who sleeps on the balcony. " * (1 + i % 3),
                        "timestamp": (t0 + timedelta(days=s, minutes=i)).isoformat(),
                    }
                    for i in range(20)
                ],
                session=f"s{s}",
            )
        tiers = dict(raw_rows(mem.store, "SELECT tier, COUNT(*) FROM nodes WHERE level = 1 GROUP BY tier"))
    assert tiers["cold"] > 20 and tiers["warm"] > 2  # segments went warm, then cold
    with sqlite3.connect(path) as conn:
        pages, payload = conn.execute(
            "SELECT SUM(pgsize), SUM(payload) FROM dbstat WHERE name IN ('nodes', 'node_views')"
        ).fetchone()
    conn.close()
    # With the views in the rows: 241,664 bytes of pages for 70,949 of payload (3.4x); now about 1.4x.
    assert pages <= 2 * payload


def test_an_upgraded_sqlite_store_gives_back_the_bytes_its_rows_no_longer_use(tmp_path: Path) -> None:
    """6-bit vectors rewritten in place free no page: the upgrade vacuums when the part-empty pages add up."""
    import sqlite3

    path = tmp_path / "up.db"
    emb = HashEmbedder(384)
    with Memory(str(path), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        for s in range(8):
            mem.add(_chat(40, s), session=f"s{s}")
        texts = [t.turn.text for t in mem.store.iter_turns("n")]
        ids = sorted(mem.store.embeddings.turns.load("n"))
        old = dict(zip(ids, encode_int8(np.asarray(emb.embed_batch(texts), dtype=np.float32)), strict=True))
        _as_before_m025(mem.store, old)
        raw_rows(mem.store, "VACUUM")  # the previous layout, packed as a store of it would be

    def pages() -> tuple[int, int]:
        with sqlite3.connect(path) as conn:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            out = (conn.execute("PRAGMA page_count").fetchone()[0], conn.execute("PRAGMA freelist_count").fetchone()[0])
        conn.close()
        return out

    before, _ = pages()
    with Memory(str(path), namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(384)) as mem:  # m025 runs
        assert {len(r.vector or b"") for r in mem.store.embeddings.turns.load("n").values()} == {288}
    after, free = pages()
    # 320 vectors 100 bytes smaller: ~31 KB of ~0.4 MB, given back (without the VACUUM: the same page count).
    assert free == 0 and after <= before - 6
