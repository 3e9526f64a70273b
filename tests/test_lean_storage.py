"""Issue 28's lean storage: index terms as vocabulary ids, compact manifests, retention by bytes, the migrations.

Real SQLite files and a real PostgreSQL (pgserver); the index tests use the
offline ``HashEmbedder`` (deterministic vectors), so rankings compare exactly.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.records.manifests import ContextItem, Manifest, NearMiss
from stratamem.store.manifest_rows import decode_manifest, encode_manifest
from stratamem.store.open import open_store
from stratamem.store.term_ids import StoredTerms, decode_ids, encode_ids, encode_many
from stratamem.testing.hash_embedder import HashEmbedder

NO_PYRAMID = Config().replace(pyramid={"enabled": False})
QUERIES = ["where is the deploy key?", "which vault holds key 7", "lisbon trip in june", "absent words only"]


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "lean.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "lean"))


def _chat(n: int, offset: int = 0) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"turn {i}: the deploy key {i % 7} is in vault {i % 3}; we fly to lisbon in june",
        }
        for i in range(offset, offset + n)
    ]


def _hits(mem: Memory, query: str) -> list[tuple[int, float]]:
    return [(h.turn_ids[0], h.score["fused"]) for h in mem._recall_index().search(query, k=10)]


# --- the term id codec -------------------------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 300), max_size=12), max_size=30))
def test_term_ids_round_trip_one_by_one_and_in_bulk(lists: list[list[int]]) -> None:
    blobs = [encode_ids(ids) for ids in lists]
    assert encode_many([i for ids in lists for i in ids], [len(ids) for ids in lists]) == blobs
    flat, offsets = decode_ids(blobs)
    assert [flat[offsets[i] : offsets[i + 1]].tolist() for i in range(len(lists))] == lists


def test_term_ids_take_one_byte_each_for_a_namespace_s_first_128_terms() -> None:
    assert [len(encode_ids([i])) for i in (0, 127, 128, 16383, 16384, 2**21, 2**32 - 1)] == [1, 1, 2, 2, 3, 4, 5]
    with pytest.raises(ValueError, match="outside"):
        encode_ids([-1])
    with pytest.raises(ValueError, match="outside"):
        encode_many([2**32], [1])


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.sampled_from(["deploy", "key", "vault", "lisbon", "june", "x", ""]), max_size=8)))
def test_stored_terms_give_back_each_turn_s_terms_in_order(lists: list[list[str]]) -> None:
    stored = StoredTerms.from_lists(lists)
    assert [stored.terms(i) for i in range(len(stored))] == lists
    assert [stored.text(i) for i in range(len(stored))] == [" ".join(t) for t in lists]


# --- the recall index ------------------------------------------------------------------------------------


def test_terms_are_stored_as_ids_into_one_vocabulary_per_namespace(where: str) -> None:
    emb = HashEmbedder(dimensions=16)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(40), session="s")
        rows = mem.store.embeddings.turns.load("n")
        vocab = mem.store.embeddings.turns.vocabulary("n")
        stored = raw_rows(mem.store, "SELECT term_ids FROM recall_index")
        terms = [t for (t,) in raw_rows(mem.store, "SELECT term FROM recall_terms ORDER BY id")]
    # Each distinct term once, numbered in order of first use; every row's terms read back as analysed.
    assert terms == vocab == list(dict.fromkeys(w for r in sorted(rows) for w in rows[r].terms.split()))
    assert len(vocab) < 128 and sum(len(bytes(b)) for (b,) in stored) == sum(
        len(r.terms.split()) for r in rows.values()
    )
    assert rows[min(rows)].terms == "user turn 0 deploi key 0 vault 0 fly lisbon jun"


def test_a_reopened_index_ranks_exactly_like_the_writer_s_own(where: str) -> None:
    emb = HashEmbedder(dimensions=32)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(60), session="a")
        mem.add(_chat(30, 60), session="b")
        before = {q: _hits(mem, q) for q in QUERIES}
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        assert {q: _hits(mem, q) for q in QUERIES} == before
        mem.add(_chat(5, 200), session="b")  # new terms ("200") after an opened index
        with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as fresh:
            assert _hits(mem, "turn 203 key") == _hits(fresh, "turn 203 key")


def test_forgetting_a_turn_takes_its_own_terms_out_of_the_vocabulary(where: str) -> None:
    emb = HashEmbedder(dimensions=16)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(6), session="s")
        secret = mem.add([{"role": "user", "content": "my passport number is zx81secret"}], session="s")[0]
        assert "zx81secret" in mem.store.embeddings.turns.vocabulary("n")
        mem.forget(turns=[secret.id])
        vocab = mem.store.embeddings.turns.vocabulary("n")
        assert "zx81secret" not in vocab and "passport" not in vocab and "deploi" in vocab
        assert raw_rows(mem.store, "SELECT COUNT(*) FROM recall_terms WHERE term = %s", ("zx81secret",)) == [(0,)]


# --- manifests --------------------------------------------------------------------------------------------


def _manifest(n_items: int, n_misses: int, query: str = "q") -> Manifest:
    items = tuple(
        ContextItem(
            f"turn:{i + 1}",
            "turn",
            10 + i,
            "recalled",
            score={"lexical": 0.123456789 * i, "vector": 1.5, "fused": 2.0 + i / 7},
            turn_ids=(i + 1,),
        )
        for i in range(n_items)
    ) + (ContextItem("node:4", "segment", 33, "summary", tier="warm", format="summary", turn_ids=(5, 6, 7, 9)),)
    misses = tuple(
        NearMiss(f"turn:{100 + i}", "turn", 5, "over_budget", {"vector": 0.3333333 + i, "fused": 1 / (i + 3)})
        for i in range(n_misses)
    )
    return Manifest(budget=4000, total_tokens=3990, items=items, near_misses=misses, query=query, notes=("n1",))


def _rounded(obj: Any) -> Any:
    if isinstance(obj, float):
        y = round(obj, 4)
        return int(y) if y.is_integer() else y
    if isinstance(obj, dict):
        return {k: _rounded(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v) for v in obj]
    return obj


def test_a_stored_manifest_reads_back_as_its_json_form_with_scores_to_four_decimals() -> None:
    data = _manifest(40, 60).to_dict()
    blob = encode_manifest(data)
    assert decode_manifest(blob) == _rounded(data) and list(decode_manifest(blob)) == list(data)
    assert len(blob) < len(json.dumps(data)) / 5


def test_a_manifest_over_its_cap_loses_near_misses_then_score_breakdowns_never_items() -> None:
    data = _manifest(40, 400).to_dict()
    whole = encode_manifest(data, 10**6)
    full = decode_manifest(whole)
    assert len(full["near_misses"]) == 400 and "stored_trimmed" not in full
    half = encode_manifest(data, len(whole) * 2 // 3)
    assert len(half) <= len(whole) * 2 // 3
    mid = decode_manifest(half)
    assert mid["items"] == full["items"] and 0 < len(mid["near_misses"]) < 400
    assert mid["near_misses"] == full["near_misses"][: len(mid["near_misses"])]  # the best ones stay
    assert mid["stored_trimmed"] == {"near_misses": 400 - len(mid["near_misses"])}
    tiny = decode_manifest(encode_manifest(data, 50))
    assert [i["id"] for i in tiny["items"]] == [i["id"] for i in full["items"]] and tiny["near_misses"] == []
    assert tiny["stored_trimmed"] == {"near_misses": 400, "scores": True}
    assert {k for i in tiny["items"] for k in i["score"]} == {"fused"}


def test_manifests_are_kept_within_a_byte_limit_and_the_newest_always_stays(where: str) -> None:
    store = open_store(where)
    try:
        ids = [store.manifests.add("ns", None, _manifest(30, 30, f"q{i}"), keep_bytes=5000) for i in range(12)]
        count, used = store.manifests.size("ns")
        kept = [m.id for m in store.manifests.latest("ns", 100)]
        assert kept == ids[::-1][:count] and 1 < count < 12 and used <= 5000
        sizes = [r[0] for r in raw_rows(store, "SELECT bytes FROM manifests ORDER BY id DESC")]
        assert sum(sizes) == used and sum(sizes) + sizes[-1] > 5000  # one more would not fit
        big = store.manifests.add("ns", None, _manifest(300, 0), keep_bytes=100)
        assert [m.id for m in store.manifests.latest("ns", 100)] == [big]
        with pytest.raises(ValueError, match="keep_bytes must be an integer of at least 1"):
            store.manifests.add("ns", None, _manifest(1, 1), keep_bytes=0)
    finally:
        store.close()


def test_the_store_s_manifests_together_keep_within_a_store_cap_and_each_namespace_its_newest(where: str) -> None:
    store = open_store(where)
    try:
        ids = {ns: [] for ns in ("a", "b", "c")}  # type: dict[str, list[int]]
        for i in range(8):
            for ns in ids:
                ids[ns].append(store.manifests.add(ns, None, _manifest(30, 30, f"{ns}{i}"), keep_store_bytes=6000))
        rows = raw_rows(store, "SELECT id, namespace, bytes FROM manifests ORDER BY id DESC")
        newest = sorted(max(v) for v in ids.values())
        kept = sorted(r[0] for r in rows)
        every = sorted(i for v in ids.values() for i in v)
        # The newest that fit, across namespaces, in the order they were written; nothing older.
        assert kept == every[-len(kept) :] and 3 <= len(kept) < 24 and set(newest) <= set(kept)
        used, biggest = sum(r[2] for r in rows), max(r[2] for r in rows)
        assert used <= 6000 < used + biggest + 16  # one more would not fit
        # One busy namespace pushes the others out, but never their newest.
        for i in range(10):
            store.manifests.add("a", None, _manifest(30, 30, f"a-late{i}"), keep_store_bytes=6000)
        left = {ns: [m.id for m in store.manifests.latest(ns, 100)] for ns in ids}
        assert left["b"] == [ids["b"][-1]] and left["c"] == [ids["c"][-1]] and len(left["a"]) > 1
        assert store.manifests.size("a")[1] + store.manifests.size("b")[1] + store.manifests.size("c")[1] <= 6000
        with pytest.raises(ValueError, match="keep_store_bytes must be an integer of at least 1"):
            store.manifests.add("a", None, _manifest(1, 1), keep_store_bytes=0)
    finally:
        store.close()


def test_memory_holds_the_store_s_manifests_to_the_configured_store_cap(tmp_path: Path) -> None:
    config = NO_PYRAMID.replace(context={"keep_store_manifest_bytes": 8000})
    with Memory(tmp_path / "m.db", namespace="n", config=config, embedder=HashEmbedder(dimensions=16)) as mem:
        for ns in ("n", "m", "o"):
            other = mem.for_namespace(ns)
            other.add(_chat(40), session="s")
            for q in QUERIES:
                other.context(q, budget=3000)
        namespaces, kept, used = raw_rows(
            mem.store, "SELECT COUNT(DISTINCT namespace), COUNT(*), SUM(bytes) FROM manifests"
        )[0]
        assert namespaces == 3 and 3 < kept < 3 * len(QUERIES) and used <= 8000


def test_memory_records_manifests_with_the_configured_byte_limits(tmp_path: Path) -> None:
    config = NO_PYRAMID.replace(context={"keep_manifest_bytes": 3000, "max_manifest_bytes": 1200})
    with Memory(tmp_path / "m.db", namespace="n", config=config, embedder=HashEmbedder(dimensions=16)) as mem:
        mem.add(_chat(80), session="s")
        for q in QUERIES * 3:
            mem.context(q, budget=3000)
        count, used = mem.store.manifests.size("n")
        assert used <= 3000 and count >= 2
        assert all(len(bytes(b)) <= 1200 for (b,) in raw_rows(mem.store, "SELECT body FROM manifests"))


# --- an old store upgrades ----------------------------------------------------------------------------------


def _downgrade(store: Any, rows: dict[int, Any], manifests: list[tuple[str, str]]) -> None:
    """Put the store back in the schema before m021 with the same data: term strings (with m019's event dates
    and sentence counts), JSON manifests."""
    pg = store.backend == "postgres"
    tenant = "namespace TEXT NOT NULL" if pg else "namespace_id INTEGER NOT NULL REFERENCES namespaces(id)"
    key = "namespace" if pg else "namespace_id"
    ns_key = "n" if pg else raw_rows(store, "SELECT id FROM namespaces WHERE name = 'n'")[0][0]
    blob = "BYTEA" if pg else "BLOB"
    for statement in [
        "DROP TABLE recall_index",
        "DROP TABLE recall_terms",
        "ALTER TABLE recall_index_meta DROP COLUMN next_term",
        f"CREATE TABLE recall_index ({tenant}, turn_id {'BIGINT' if pg else 'INTEGER'} NOT NULL, terms TEXT NOT NULL, "
        f"vector {blob}, events TEXT, sentences INTEGER, PRIMARY KEY ({key}, turn_id)){'' if pg else ' WITHOUT ROWID'}",
        "DROP TABLE manifests",
        "CREATE TABLE manifests (namespace TEXT NOT NULL, id BIGINT GENERATED ALWAYS AS IDENTITY, session TEXT, "
        "created_at TIMESTAMPTZ NOT NULL, budget INTEGER NOT NULL, total_tokens INTEGER NOT NULL, "
        "items INTEGER NOT NULL, manifest TEXT NOT NULL, PRIMARY KEY (namespace, id))"
        if pg
        else "CREATE TABLE manifests (id INTEGER PRIMARY KEY AUTOINCREMENT, namespace TEXT NOT NULL, session TEXT, "
        "created_at TEXT NOT NULL, budget INTEGER NOT NULL, total_tokens INTEGER NOT NULL, items INTEGER NOT NULL, "
        "manifest TEXT NOT NULL)",
        *([] if pg else ["CREATE INDEX manifests_namespace ON manifests (namespace, id)"]),
        "DELETE FROM _stratamem_migrations WHERE name IN ('m021_term_ids', 'm022_compact_manifests')",
    ]:
        raw_rows(store, statement)
    for r in rows.values():
        raw_rows(
            store,
            "INSERT INTO recall_index VALUES (%s, %s, %s, %s, %s, %s)",
            (ns_key, r.turn_id, r.terms, r.vector, r.events, r.sentences),
        )
    for created, body in manifests:
        raw_rows(
            store,
            "INSERT INTO manifests (namespace, session, created_at, budget, total_tokens, items, manifest) "
            "VALUES ('n', 's', %s, 1, 1, 1, %s)",
            (created, body),
        )


def test_a_store_of_the_previous_schema_upgrades_and_reads_the_same(where: str) -> None:
    emb = HashEmbedder(dimensions=32)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(50), session="s")
        contexts = [mem.context(q, budget=600) for q in QUERIES]
        rows = mem.store.embeddings.turns.load("n")
        # m021 keeps m019's columns: every row has its sentence count and its events string (not NULL).
        assert all(r.sentences == 0 and r.events is not None for r in rows.values())
        hits = {q: _hits(mem, q) for q in QUERIES}
        manifests = [(c.manifest.created_at.isoformat(), json.dumps(c.manifest.to_dict())) for c in contexts]
        _downgrade(mem.store, rows, manifests)
    store = open_store(where)  # m016 and m017 run
    try:
        names = [r[0] for r in raw_rows(store, "SELECT name FROM _stratamem_migrations ORDER BY name")]
        assert {"m021_term_ids", "m022_compact_manifests"} <= set(names)
        assert store.embeddings.turns.load("n") == rows
        assert [m.data for m in store.manifests.latest("n")] == [_rounded(c.manifest.to_dict()) for c in contexts][::-1]
        ids = [m.id for m in store.manifests.latest("n")]
        assert store.manifests.add("n", None, _manifest(1, 1)) > max(ids)  # ids go on, never reused
    finally:
        store.close()
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        assert {q: _hits(mem, q) for q in QUERIES} == hits
        assert np.isfinite([s for h in hits.values() for _, s in h]).all()


# --- bytes per part --------------------------------------------------------------------------------------------


def test_status_shows_the_store_s_bytes_per_part(where: str) -> None:
    emb = HashEmbedder(dimensions=16)
    with Memory(open_store(where), namespace="n", config=NO_PYRAMID, embedder=emb) as mem:
        mem.add(_chat(30), session="s")
        mem.context("deploy key", budget=400)
        status = mem.status()
        parts = status.part_bytes
        assert {"turns", "recall_index", "items", "pyramid", "manifests", "other"} <= set(parts)
        assert parts["turns"] > 0 and parts["recall_index"] > 0 and parts["manifests"] > 0
        # The parts are the whole store: file + WAL on SQLite (free pages included), every table on PostgreSQL.
        assert sum(v for k, v in parts.items() if k != "archive") == status.store_bytes
        assert status.to_dict()["part_bytes"] == dict(parts)


def test_the_cli_shows_bytes_per_part(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from stratamem.cli import main

    db = tmp_path / "c.db"
    with Memory(db, namespace="default", config=NO_PYRAMID, embedder=HashEmbedder(dimensions=16)) as mem:
        mem.add(_chat(10), session="s")
    out = CliRunner().invoke(main, ["--db", str(db), "--embedding", "none", "status"], catch_exceptions=False).output
    lines = dict(line.split(None, 1) for line in out.splitlines())
    assert int(lines["bytes.turns"].replace(",", "")) > 0 and int(lines["bytes.recall_index"].replace(",", "")) > 0
    as_json = CliRunner().invoke(main, ["--db", str(db), "--embedding", "none", "status", "--json"]).output
    assert json.loads(as_json)["part_bytes"]["turns"] == int(lines["bytes.turns"].replace(",", ""))


def test_an_upgrade_that_rebuilds_the_index_gives_its_old_pages_back(tmp_path: Path) -> None:
    # The previous schema's index, with term strings: what m021 copies into a new table and drops.
    path = str(tmp_path / "old.db")
    with Memory(open_store(path), namespace="n", config=NO_PYRAMID, embedder=HashEmbedder(dimensions=32)) as mem:
        mem.add(_chat(20), session="s")
        contexts = [mem.context(q, budget=600) for q in QUERIES]
        rows = mem.store.embeddings.turns.load("n")
        manifests = [(c.manifest.created_at.isoformat(), json.dumps(c.manifest.to_dict())) for c in contexts]
        _downgrade(mem.store, rows, manifests)
        words = " ".join(f"lisbon{j % 40}" for j in range(300))
        for turn_id in range(1000, 2500):
            raw_rows(mem.store, "INSERT INTO recall_index VALUES (1, %s, %s, NULL, NULL, NULL)", (turn_id, words))
    old_size = Path(path).stat().st_size
    assert old_size > 4_000_000
    store = open_store(path)  # m021 and m022 rebuild their tables, then the file is vacuumed
    try:
        assert raw_rows(store, "PRAGMA freelist_count") == [(0,)]
        assert store.embeddings.turns.counts("n")[0] == 20 + 1500
    finally:
        store.close()
    assert Path(path).stat().st_size < old_size // 4
    assert not Path(path + "-wal").exists() or Path(path + "-wal").stat().st_size == 0
