"""Item vector search on PostgreSQL: exact pgvector scan vs an HNSW index vs the in-process numpy index.

Run from the repository root::

    .venv/bin/python benchmarks/pg_vector_bench.py                  # 10k and 100k vectors
    .venv/bin/python benchmarks/pg_vector_bench.py --sizes 10000    # quicker

For each size it fills ``memory_items`` of a fresh store (schema of a
throwaway pgserver, or ``STRATAMEM_PG_DSN``) with clustered synthetic
384-dimensional unit vectors (200 centroids plus noise, as sentence
embeddings cluster by topic), in two layouts: one namespace holding every
row, and ten namespaces holding a tenth each (the tenant filter then has to
discard nine rows in ten). It reports, per layout, the latency of

* ``exact``: :meth:`PostgresItemStore.nearest` (a scan; what stratamem ships),
* ``hnsw ef=40 / ef=200``: the same query through an HNSW index
  (``m=16, ef_construction=64``, pgvector's defaults) with its build time and
  its recall@10 against the exact answer,
* ``numpy``: :class:`stratamem.items.search.VectorIndex` after loading the
  namespace with ``vectors_after`` (the path ``Items.recall`` takes on both
  backends), with the load time.

Figures are wall-clock on whatever machine runs this (noisy on a shared box).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from pg import LocalPostgres, fresh_schema, schema_url  # noqa: E402

from stratamem.items.search import VectorIndex  # noqa: E402
from stratamem.store import open_store  # noqa: E402

DIMS = 384
K = 10


def clustered(n: int, rng: np.random.Generator, centroids: np.ndarray) -> np.ndarray:
    """Unit vectors near random centroids."""
    pick = rng.integers(0, len(centroids), n)
    vecs = centroids[pick] + 0.35 * rng.standard_normal((n, DIMS)).astype(np.float32) / np.sqrt(DIMS) * 4
    return (vecs / np.linalg.norm(vecs, axis=1, keepdims=True)).astype(np.float32)


def load(store: object, vecs: np.ndarray, namespaces: int) -> None:
    """Bulk-load item rows with pgvector's binary COPY (the store's own insert is per item)."""
    from pgvector.psycopg import register_vector

    # A connection of its own: registering pgvector's loaders must not leak into the store's pool.
    with psycopg.connect(store.dsn, autocommit=True) as conn:  # type: ignore[attr-defined]
        conn.execute(sql.SQL("SET search_path TO {}, public").format(sql.Identifier(store.schema)))  # type: ignore[attr-defined]
        register_vector(conn)
        # Bench rows need no full-text terms (a throwaway schema may take a default).
        conn.execute("ALTER TABLE memory_items ALTER COLUMN terms SET DEFAULT ''::tsvector")
        with conn.cursor().copy(
            "COPY memory_items (namespace, content, type, tier, tokens, created_at, relevance, source, "
            "embedding, embedding_model) FROM STDIN WITH (FORMAT BINARY)"
        ) as copy:
            copy.set_types(["text", "text", "text", "text", "int4", "timestamptz", "float8", "text", "vector", "text"])
            now = datetime.now(UTC)
            for i, v in enumerate(vecs):
                copy.write_row([f"ns{i % namespaces}", f"item {i}", "fact", "cold", 2, now, 1.0, "api", v, "bench"])
        conn.execute("ANALYZE memory_items")


def timed(fn: object, queries: np.ndarray) -> tuple[list[list[int]], float, float]:
    """Results and p50/p95 milliseconds of ``fn(query)`` over the queries."""
    out, ms = [], []
    for q in queries:
        t = time.perf_counter()
        out.append(fn(q))  # type: ignore[operator]
        ms.append((time.perf_counter() - t) * 1000)
    ms.sort()
    return out, statistics.median(ms), ms[int(0.95 * (len(ms) - 1))]


def recall(got: list[list[int]], truth: list[list[int]]) -> float:
    return sum(len(set(g) & set(t)) for g, t in zip(got, truth, strict=True)) / sum(len(t) for t in truth)


def run(dsn: str, n: int, namespaces: int, queries: int, rng: np.random.Generator) -> list[str]:
    centroids = rng.standard_normal((200, DIMS)).astype(np.float32)
    vecs = clustered(n, rng, centroids)
    qs = clustered(queries, rng, centroids)
    store = open_store(schema_url(dsn, fresh_schema(dsn, "vb")))
    rows = []
    try:
        t = time.perf_counter()
        load(store, vecs, namespaces)
        load_s = time.perf_counter() - t
        ns = "ns0"
        label = f"{n:,} rows, {namespaces} namespace(s)"
        exact, p50, p95 = timed(lambda q: [i for i, _ in store.items.nearest(ns, q, K)], qs)
        rows.append(f"| {label} | exact scan (shipped) | {p50:.1f} / {p95:.1f} | 1.000 | — (COPY {load_s:.1f} s) |")

        t = time.perf_counter()
        index = VectorIndex()
        index.extend(store.items.vectors_after(ns, 0))
        index.search(qs[0], K)
        build = time.perf_counter() - t
        got, p50, p95 = timed(lambda q: [i for i, _ in index.search(q, K)], qs)
        rows.append(
            f"| {label} | numpy VectorIndex (Items.recall) | {p50:.2f} / {p95:.2f} | "
            f"{recall(got, exact):.3f} | load {build:.1f} s |"
        )

        with store.connection() as conn:  # type: ignore[attr-defined]
            conn.execute("SET maintenance_work_mem = '512MB'")
            t = time.perf_counter()
            # HNSW needs a fixed dimension: an expression index over the cast.
            conn.execute(
                f"CREATE INDEX bench_hnsw ON memory_items USING hnsw ((embedding::vector({DIMS})) vector_cosine_ops)"
            )
            hnsw_s = time.perf_counter() - t
        for ef in (40, 200):

            def hnsw(q: np.ndarray, ef: int = ef) -> list[int]:
                lit = "[" + ",".join(repr(float(x)) for x in q) + "]"
                with store.connection() as conn:  # type: ignore[attr-defined]
                    with conn.transaction():
                        conn.execute(f"SET LOCAL hnsw.ef_search = {ef}")
                        return [
                            r[0]
                            for r in conn.execute(
                                f"SELECT id FROM memory_items WHERE namespace = %s "
                                f"ORDER BY embedding::vector({DIMS}) <=> %s::vector({DIMS}) LIMIT {K}",
                                (ns, lit),
                            )
                        ]

            got, p50, p95 = timed(hnsw, qs)
            rows.append(
                f"| {label} | HNSW ef_search={ef} | {p50:.1f} / {p95:.1f} | {recall(got, exact):.3f} | "
                f"build {hnsw_s:.1f} s |"
            )
    finally:
        store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    parser.add_argument("--queries", type=int, default=50)
    args = parser.parse_args()
    server = None
    dsn = os.environ.get("STRATAMEM_PG_DSN")
    if not dsn:
        server = LocalPostgres()
        dsn = server.dsn
    rng = np.random.default_rng(7)
    print("| data | method | p50 / p95 ms | recall@10 vs exact | build |")
    print("|---|---|---|---|---|")
    try:
        for n in args.sizes:
            for namespaces in (1, 10):
                for row in run(dsn, n, namespaces, args.queries, rng):
                    print(row, flush=True)
    finally:
        if server is not None:
            server.stop()


if __name__ == "__main__":
    main()
