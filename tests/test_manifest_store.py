"""Recorded manifests behave the same on both backends."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg import fresh_schema, schema_url

from stratamem.records.manifests import ContextItem, Manifest
from stratamem.store import Store
from stratamem.store.open import open_store


@pytest.fixture(params=["sqlite", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Store]:
    if request.param == "sqlite":
        target = str(tmp_path / "m.db")
    else:
        dsn = request.getfixturevalue("pg_dsn")
        target = schema_url(dsn, fresh_schema(dsn))
    s = open_store(target)
    yield s
    s.close()


def _manifest(budget: int) -> Manifest:
    return Manifest(
        budget=budget,
        total_tokens=budget - 1,
        query=f"q{budget}",
        items=(ContextItem("turn:1", "turn", budget - 4, "recalled", turn_ids=(1,)),),
    )


def test_manifests_are_kept_newest_first_per_namespace_within_keep(store: Store) -> None:
    ids = [store.manifests.add("ns", "s", _manifest(b), keep=3) for b in (10, 20, 30, 40)]
    other = store.manifests.add("other", None, _manifest(99), keep=3)
    assert ids == sorted(ids) and len(set(ids + [other])) == 5
    assert [m.data["budget_tokens"] for m in store.manifests.latest("ns")] == [40, 30, 20]
    assert store.manifests.get("ns", ids[0]) is None  # dropped past keep
    assert store.manifests.get("ns", other) is None  # another namespace's
    got = store.manifests.get("ns", ids[-1])
    assert got is not None and (got.session, got.data["query"], got.data["items"][0]["turn_ids"]) == ("s", "q40", [1])
    assert [m.data["budget_tokens"] for m in store.manifests.latest("other")] == [99]
    with pytest.raises(ValueError, match="keep must be an integer of at least 1"):
        store.manifests.add("ns", "s", _manifest(5), keep=0)


def test_reported_usage_goes_on_the_sessions_newest_manifest(store: Store) -> None:
    first = store.manifests.add("ns", "s", _manifest(10))
    newest = store.manifests.add("ns", "s", _manifest(20))
    elsewhere = store.manifests.add("ns", "t", _manifest(30))
    reported = {"input": 2000, "cached_read": 1536, "cache_written": 0, "hit_rate": 0.768, "source": "openai-chat"}
    assert store.manifests.set_reported("ns", "s", reported) == newest
    rows = [store.manifests.get("ns", i) for i in (first, newest, elsewhere)]
    assert [r.data.get("cache") if r else "missing" for r in rows] == [None, {"reported": reported}, None]
    assert store.manifests.set_reported("ns", "nobody", reported) is None
    assert store.manifests.set_reported("other", "s", reported) is None


def test_the_cache_record_survives_the_compact_stored_form() -> None:
    from stratamem.store.manifest_rows import decode_manifest, encode_manifest

    cache = {
        "stable_tokens": 1834,
        "layer_hashes": {"instructions": "sha256:ab", "ledger": "sha256:cd"},
        "breakpoints": [{"at": "system", "index": 1, "tokens": 1834}],
        "cacheable": True,
        "anchor": {"turn": 35, "jumped_at": 38},
    }
    data = {"timestamp": "2026-11-27T12:00:00+00:00", "budget_tokens": 2000, "total_tokens": 1900, "cache": cache}
    assert decode_manifest(encode_manifest(data))["cache"] == cache
    assert "cache" not in decode_manifest(encode_manifest({**data, "cache": None}))
