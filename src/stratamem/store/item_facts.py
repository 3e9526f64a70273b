"""One extracted item per fact: the uniqueness rule of ``memory_items`` and its migration (``m018_item_facts``).

An auto-extracted item carries ``fact_key`` (:func:`stratamem.records.items.fact_key`
of its text: case, accents, spacing and punctuation do not count), and a
partial unique index on ``(tenant, fact_key)`` lets a namespace hold each key
once. Writers check inside their transaction under the namespace's item guard
(:meth:`~stratamem.store.item_store.ItemStore.lock`), and the index is what
makes it true whatever a code path forgets: two processes extracting the same
fact at once end with one item whose provenance names both turns. API items
keep ``fact_key`` NULL, so the rule never touches them.

The migration, one body for both backends (the dialect decides the spelling):

1. adds ``fact_key`` and ``salience`` (the extractor's score, which the review
   queue's cap reads) to ``memory_items``, and ``item_spend`` (what a model
   extractor cost: calls and provider tokens per namespace);
2. computes ``fact_key`` of every extracted item (in Python, in batches by key);
3. collapses the duplicates today's check-then-insert race left, per
   ``(tenant, fact_key)``: the **keeper** is the copy in the highest tier
   (hot, warm, cold), then the lowest id (no tier moves, so nothing spills); it
   takes the union of the copies' provenance, the sum of their accesses, the
   highest relevance, ``rejected`` if any copy was rejected (the user said no),
   else ``confirmed`` if any was; a superseded copy makes the keeper superseded
   too. The other copies lose their key and become superseded by the keeper:
   out of recall and hot, their ids still resolve (manifests, the dashboard), and
   ``prune`` takes them first. Items that named a copy as their replacement
   name the keeper instead;
4. creates the unique index.

All of it runs in the migration's transaction: a failure leaves the store as it was.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from ..records.items import fact_key
from .ddl import create_table
from .sql import SQLITE, Dialect, dialect_of

__all__ = ["ITEM_SPEND_COLUMNS", "m018_item_facts"]

ITEM_SPEND_COLUMNS: tuple[str, ...] = (
    "{tenant_pk}",
    "calls {bigint} NOT NULL DEFAULT 0",
    "input_tokens {bigint} NOT NULL DEFAULT 0",
    "output_tokens {bigint} NOT NULL DEFAULT 0",
    "failures {bigint} NOT NULL DEFAULT 0",
)
"""``item_spend``: model calls made to extract items, the tokens the provider counted, and the
extractions that failed (their segments fell back to the offline rules)."""

_BATCH = 1000
_TIER_RANK = {"hot": 0, "warm": 1, "cold": 2}


def m018_item_facts(conn: Any) -> None:
    """Extracted items get a uniqueness key and a salience; duplicates collapse; ``item_spend`` (both backends)."""
    d = dialect_of(conn)
    conn.execute("ALTER TABLE memory_items ADD COLUMN fact_key TEXT")
    conn.execute(f"ALTER TABLE memory_items ADD COLUMN salience {'REAL' if d is SQLITE else 'DOUBLE PRECISION'}")
    conn.execute(create_table(d, "item_spend", ITEM_SPEND_COLUMNS))
    _backfill(conn, d)
    for tenant, key in conn.execute(
        d.sql(
            f"SELECT {d.tenant}, fact_key FROM memory_items WHERE fact_key IS NOT NULL "
            f"GROUP BY {d.tenant}, fact_key HAVING COUNT(*) > 1 ORDER BY {d.tenant}, fact_key"
        )
    ).fetchall():
        _collapse(conn, d, tenant, key)
    conn.execute(
        f"CREATE UNIQUE INDEX memory_items_fact_key ON memory_items ({d.tenant}, fact_key) WHERE fact_key IS NOT NULL"
    )


def _backfill(conn: Any, d: Dialect) -> None:
    """``fact_key`` of every extracted item, read and written in batches by key."""
    keys = f"{d.tenant}, id"
    last: tuple[Any, ...] = ()
    while True:
        after = f"AND ({keys}) > (?, ?)" if last else ""
        rows = conn.execute(
            d.sql(
                f"SELECT {keys}, content FROM memory_items WHERE source = 'extracted' {after} "
                f"ORDER BY {keys} LIMIT {_BATCH}"
            ),
            last,
        ).fetchall()
        if not rows:
            return
        last = tuple(rows[-1][:2])
        cur = conn.cursor()
        cur.executemany(
            d.sql(f"UPDATE memory_items SET fact_key = ? WHERE {d.tenant} = ? AND id = ?"),
            [(fact_key(r[2]), r[0], r[1]) for r in rows],
        )


def _collapse(conn: Any, d: Dialect, tenant: Any, key: str) -> None:
    """Make one item of the copies holding ``key`` in ``tenant`` (the rule in the module docstring)."""
    rows = conn.execute(
        d.sql(
            "SELECT id, tier, review, provenance, access_count, relevance, superseded_by, valid_to "
            f"FROM memory_items WHERE {d.tenant} = ? AND fact_key = ? ORDER BY id"
        ),
        (tenant, key),
    ).fetchall()
    keeper = min(rows, key=lambda r: (_TIER_RANK.get(r[1], 3), r[0]))
    ids = {int(r[0]) for r in rows}
    losers = sorted(ids - {int(keeper[0])})
    reviews = {r[2] for r in rows}
    review = "rejected" if "rejected" in reviews else "confirmed" if "confirmed" in reviews else keeper[2]
    provenance = sorted({int(t) for r in rows for t in json.loads(r[3] or "[]")})
    replaced = [r for r in rows if r[6] is not None and int(r[6]) not in ids]
    by, valid_to, tier = keeper[6], keeper[7], keeper[1]
    if by is not None and int(by) in ids:  # superseded by its own copy: not a replacement
        by = None
    if by is None and replaced:
        first = min(replaced, key=lambda r: int(r[6]))
        by, valid_to = int(first[6]), first[7]
        tier = "cold" if tier == "hot" else tier  # a replaced fact leaves the prompt
    _repoint(conn, d, tenant, losers, int(keeper[0]))
    conn.execute(
        d.sql(
            "UPDATE memory_items SET provenance = ?, review = ?, access_count = ?, relevance = ?, "
            f"superseded_by = ?, valid_to = ?, tier = ? WHERE {d.tenant} = ? AND id = ?"
        ),
        (
            json.dumps(provenance),
            review,
            sum(int(r[4]) for r in rows),
            max(float(r[5]) for r in rows),
            by,
            valid_to,
            tier,
            tenant,
            int(keeper[0]),
        ),
    )
    clause, params = d.one_of("id", losers)
    conn.execute(
        d.sql(
            "UPDATE memory_items SET fact_key = NULL, superseded_by = ?, "
            f"tier = CASE WHEN tier = 'hot' THEN 'cold' ELSE tier END WHERE {d.tenant} = ? AND {clause}"
        ),
        (int(keeper[0]), tenant, *params),
    )


def _repoint(conn: Any, d: Dialect, tenant: Any, losers: Sequence[int], keeper: int) -> None:
    """Items superseded by a collapsed copy are superseded by the keeper instead."""
    clause, params = d.one_of("superseded_by", losers)
    clause_ids, id_params = d.one_of("id", [*losers, keeper])
    conn.execute(
        d.sql(f"UPDATE memory_items SET superseded_by = ? WHERE {d.tenant} = ? AND {clause} AND NOT ({clause_ids})"),
        (keeper, tenant, *params, *id_params),
    )
