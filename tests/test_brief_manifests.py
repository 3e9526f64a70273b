"""Issue 28: older manifests kept in their brief form (reasons and fused scores), the newest in full.

Real SQLite files and a real PostgreSQL (pgserver); ``Memory`` runs with the
offline ``HashEmbedder``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.errors import ConfigError
from stratamem.records.manifests import ContextItem, Manifest, NearMiss
from stratamem.store.manifest_rows import brief_manifest, decode_manifest, encode_manifest
from stratamem.store.open import open_store
from stratamem.testing.hash_embedder import HashEmbedder


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "brief.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "brief"))


def _manifest(n_items: int, n_misses: int, query: str = "q") -> Manifest:
    names = ("lexical", "lexical_window", "vector", "vector_window", "speaker", "substance")
    items = tuple(
        ContextItem(
            f"turn:{i + 1}",
            "turn",
            10 + i,
            "recalled",
            score={**{n: 0.123456789 * (i + k) for k, n in enumerate(names)}, "fused": 2.0 + i / 7},
            turn_ids=(i + 1,),
        )
        for i in range(n_items)
    ) + (
        ContextItem("node:4", "segment", 33, "summary", tier="warm", format="summary", turn_ids=(5, 6, 7, 9)),
        ContextItem("item:3", "item", 12, "recalled_item", tier="cold", score={"match": 0.75}, turn_ids=(2,)),
    )
    misses = tuple(
        NearMiss(f"turn:{100 + i}", "turn", 5, "over_budget", {"vector": 0.3333333 + i, "fused": 1 / (i + 3)})
        for i in range(n_misses)
    )
    return Manifest(budget=4000, total_tokens=3990, items=items, near_misses=misses, query=query, notes=("n1",))


def _why(data: dict) -> list[tuple]:
    """What "why is this in my prompt" reads of a manifest: each entry's and near-miss's reason and fused score."""
    rows = [
        (e["id"], e["kind"], e["tier"], e["tokens"], e["reason"], e["score"].get("fused"), tuple(e["turn_ids"]))
        for e in data["items"]
    ]
    return rows + [(n["id"], n["reason"], n["tokens"], n["score"].get("fused")) for n in data["near_misses"]]


def test_a_brief_manifest_keeps_every_entry_s_reason_and_fused_score_in_under_half_the_bytes() -> None:
    full = encode_manifest(_manifest(60, 60).to_dict())
    brief = brief_manifest(full)
    assert brief is not None and len(brief) < len(full) / 2
    before, after = decode_manifest(full), decode_manifest(brief)
    assert _why(after) == _why(before) and after["query"] == before["query"] and after["notes"] == before["notes"]
    assert {k for e in after["items"] + after["near_misses"] for k in e["score"]} == {"fused", "match"}
    assert after["items"][-1]["score"] == {"match": 0.75}  # an item ranked by its match keeps it
    assert after["stored_trimmed"] == {"scores": True} and "stored_trimmed" not in before
    assert brief_manifest(brief) is None  # brief once: never re-encoded


def test_the_newest_manifests_keep_their_breakdowns_and_older_ones_are_stored_brief(where: str) -> None:
    store = open_store(where)
    try:
        ids = [store.manifests.add("ns", None, _manifest(40, 40, f"q{i}"), keep_full=2) for i in range(6)]
        store.manifests.add("other", None, _manifest(40, 40, "o"), keep_full=0)
        kept = store.manifests.latest("ns", 100)
        assert [m.id for m in kept] == ids[::-1]
        full = [m.id for m in kept if "stored_trimmed" not in m.data]
        assert full == ids[:-3:-1]
        for m in kept[2:]:
            assert m.data["stored_trimmed"] == {"scores": True}
            assert _why(dict(m.data)) == _why(
                decode_manifest(encode_manifest(_manifest(40, 40, m.data["query"]).to_dict()))
            )
        sizes = dict(raw_rows(store, "SELECT id, bytes FROM manifests WHERE namespace = 'ns'"))
        assert max(sizes[i] for i in ids[:4]) < 0.6 * min(sizes[i] for i in ids[4:])
        bodies = raw_rows(store, "SELECT bytes, body FROM manifests")
        assert all(n == len(bytes(b)) for n, b in bodies)
        # keep_full=0: every manifest is stored brief, the newest too
        assert store.manifests.latest("other", 1)[0].data["stored_trimmed"] == {"scores": True}
        with pytest.raises(ValueError, match="keep_full must be an integer of at least 0"):
            store.manifests.add("ns", None, _manifest(1, 1), keep_full=-1)
    finally:
        store.close()


def test_byte_limits_count_the_brief_form_so_more_manifests_are_kept(where: str) -> None:
    store = open_store(where)
    try:
        for i in range(30):
            store.manifests.add("all", None, _manifest(40, 40, f"a{i}"), keep_bytes=12000)
            store.manifests.add("tier", None, _manifest(40, 40, f"t{i}"), keep_bytes=12000, keep_full=1)
        (n_all, used_all), (n_tier, used_tier) = store.manifests.size("all"), store.manifests.size("tier")
        assert used_all <= 12000 and used_tier <= 12000 and n_tier >= n_all + n_all // 2
    finally:
        store.close()


def test_memory_keeps_the_configured_number_of_full_manifests(tmp_path: Path) -> None:
    config = Config().replace(pyramid={"enabled": False}, context={"keep_full_manifests": 1})
    chat = [{"role": "user", "content": f"turn {i}: the deploy key {i % 7} is in vault {i % 3}"} for i in range(40)]
    with Memory(tmp_path / "m.db", namespace="n", config=config, embedder=HashEmbedder(dimensions=16)) as mem:
        mem.add(chat, session="s")
        for q in ("deploy key", "vault 2", "key 5", "vault"):
            mem.context(q, budget=3000)
        kept = mem.store.manifests.latest("n", 10)
        assert [("stored_trimmed" in m.data) for m in kept] == [False, True, True, True]
        assert [m.data["query"] for m in kept] == ["vault", "key 5", "vault 2", "deploy key"]


def test_the_default_keeps_three_full_manifests_and_rejects_a_negative_count() -> None:
    assert Config().context.keep_full_manifests == 3
    assert Config().context.keep_store_manifest_bytes == 491520 and Config().context.keep_manifest_bytes == 131072
    with pytest.raises(ConfigError, match="keep_full_manifests"):
        Config().replace(context={"keep_full_manifests": -1})
