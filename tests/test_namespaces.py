"""Namespace isolation, as a property on both backends.

Random operations across a few namespaces are applied to a real store and to
a plain in-memory model; afterwards every namespace reads back exactly what the
model says it holds, so no operation ever read or changed another
namespace's rows. Each example uses fresh namespace names, so one store per
backend serves every example.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pg import fresh_schema, schema_url

from stratamem.records import Turn
from stratamem.store import Store, TurnBatch, open_store

T0 = datetime(2024, 1, 1, tzinfo=UTC)
_example = itertools.count()

# Names that differ only in case or by a prefix: the spots where a sloppy
# filter (LIKE, case folding, prefix match) would leak rows across.
NAMES = ["a", "A", "ab", "a.b"]
SESSIONS = ["s", "S", "s1"]

ops = st.lists(
    st.one_of(
        st.tuples(
            st.just("append"),
            st.sampled_from(NAMES),
            st.lists(st.tuples(st.sampled_from(SESSIONS), st.integers(1, 3)), min_size=1, max_size=3),
        ),
        st.tuples(st.just("ensure"), st.sampled_from(NAMES), st.sampled_from(SESSIONS)),
        st.tuples(st.just("rollback"), st.sampled_from(NAMES), st.sampled_from(SESSIONS)),
    ),
    min_size=1,
    max_size=12,
)


@pytest.fixture(scope="module", params=["sqlite", "postgres"])
def shared_store(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Store]:
    if request.param == "sqlite":
        store = open_store(str(tmp_path_factory.mktemp("ns") / "ns.db"))
    else:
        dsn = request.getfixturevalue("pg_dsn")
        store = open_store(schema_url(dsn, fresh_schema(dsn, "ns")))
    yield store
    store.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(operations=ops)
def test_operations_never_cross_namespaces(shared_store: Store, operations: list[tuple]) -> None:
    store = shared_store
    prefix = f"x{next(_example)}-"
    model: dict[str, dict[str, list[str]]] = {}  # namespace -> session -> texts
    counter = itertools.count()
    for op, ns_name, arg in operations:
        ns = prefix + ns_name
        if op == "append":
            batches = []
            for session, n in arg:
                texts = [f"{ns}|{session}|{next(counter)}" for _ in range(n)]
                batches.append(TurnBatch(session, [Turn(role="user", content=t, timestamp=T0) for t in texts], [1] * n))
                model.setdefault(ns, {}).setdefault(session, []).extend(texts)
            store.append(ns, batches)
        elif op == "ensure":
            store.ensure_session(ns, arg)
            model.setdefault(ns, {}).setdefault(arg, [])
        else:  # a write that fails half-way must leave no trace in any namespace
            with pytest.raises(RuntimeError), store.transaction():
                store.append(ns, [TurnBatch(arg, [Turn(role="user", content="never", timestamp=T0)], [1])])
                raise RuntimeError("abort")

    mine = [n for n in store.namespaces() if n.startswith(prefix)]
    assert mine == sorted(model)
    every_id = [t.id for ns in mine for t in store.turns(ns)]
    for ns, sessions in model.items():
        got = store.turns(ns)
        assert {t.namespace for t in got} <= {ns}
        by_session: dict[str, list[str]] = {}
        for t in got:
            by_session.setdefault(t.session, []).append(t.text)
            assert t.seq == len(by_session[t.session])  # gap-free within the session
        assert by_session == {s: texts for s, texts in sessions.items() if texts}
        assert sorted(s.name for s in store.sessions(ns)) == sorted(sessions)
        # Asking for every id of every namespace returns only this namespace's turns.
        assert sorted(t.id for t in store.turns(ns, ids=every_id)) == sorted(t.id for t in got)
        stats = store.stats(ns)
        assert (stats.sessions, stats.turns) == (len(sessions), sum(len(v) for v in sessions.values()))


def test_a_namespace_that_was_never_written_reads_empty(tmp_path: Path) -> None:
    store = open_store(str(tmp_path / "e.db"))
    store.append("a", [TurnBatch("s", [Turn(role="user", content="x", timestamp=T0)], [1])])
    assert (store.turns("b"), store.sessions("b"), store.stats("b").turns, store.has_namespace("b")) == (
        [],
        [],
        0,
        False,
    )
    store.close()
