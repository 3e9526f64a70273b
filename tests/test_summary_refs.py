"""Issue 28: summary sentences stored as references to the turns they quote (``m027_compact_content``).

The codec (a property test: what is packed reads back the same), real
LoCoMo conversations and a real Claude Code transcript stored on both
backends (quotes by reference, summaries read back as the summarizer wrote
them), the upgrade of a store whose summaries hold the quoted text, and the
two ways turns leave a store: a purging retention writes the quoted text
back first, a forget clears the summaries that quoted the turn.

Real SQLite files and a real PostgreSQL (pgserver); no embedding model
(summaries are extractive, vectors play no part here).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pg import fresh_schema, raw_rows, schema_url

from stratamem import Config, Memory
from stratamem.ingest import read_file
from stratamem.pyramid.retention import apply_retention
from stratamem.records import Summary
from stratamem.store.open import open_store
from stratamem.store.summary_refs import pack, unpack

SHARED = Path(__file__).resolve().parents[2] / "shared"
LOCOMO = SHARED / "data" / "locomo" / "locomo10.json"
TRANSCRIPT = SHARED / "data" / "transcripts" / "claude_code" / "258c7280-ae70-4798-800f-63464d01a85d.jsonl"

PYRAMID = Config().replace(
    pyramid={"micro_chunk_size": 6, "mini_chunk_size": 4, "macro_chunk_size": 4, "hot_chunks": 2, "warm_max_turns": 30}
)


@pytest.fixture(params=["sqlite", "postgres"])
def where(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh store's location on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "refs.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "refs"))


def _locomo(sessions: int) -> list[tuple[str, list[dict[str, Any]]]]:
    """The first ``sessions`` sessions of LoCoMo's first conversation, as messages with timestamps."""
    conv = json.loads(LOCOMO.read_text())[0]["conversation"]
    out = []
    for i in range(1, sessions + 1):
        start = datetime.strptime(conv[f"session_{i}_date_time"], "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)
        msgs = [
            {
                "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                "name": t["speaker"],
                "content": t["text"],
                "timestamp": (start + timedelta(seconds=30 * k)).isoformat(),
            }
            for k, t in enumerate(conv[f"session_{i}"])
        ]
        out.append((f"session_{i}", msgs))
    return out


def _fill(mem: Memory) -> None:
    for name, msgs in _locomo(6):
        mem.add(msgs, session=name)
    transcript = mem.for_namespace("cc")
    transcript.ingest(read_file(TRANSCRIPT))


def _entries(summary: dict[str, Any]) -> list[Any]:
    return [*summary.get("sentences", ()), *[f for f in summary.get("key_facts", ()) if isinstance(f, list)]]


def _raw(mem: Memory, ns: str) -> list[str]:
    """The stored summary texts of a namespace's nodes, as the store holds them."""
    column = "namespace_id" if mem.store.backend == "sqlite" else "namespace"
    key = mem.store.sql.tenant_key(ns)
    return [
        r[0]
        for r in raw_rows(
            mem.store, f"SELECT summary FROM nodes WHERE summary IS NOT NULL AND {column} = %s ORDER BY id", (key,)
        )
    ]


def _summaries(mem: Memory) -> dict[tuple[str, int], dict[str, Any]]:
    """Every node's summary (``Summary.to_dict``) of the two namespaces, by (namespace, node id)."""
    out = {}
    for ns in ("t", "cc"):
        for node in mem.for_namespace(ns).pyramid.nodes():
            out[(ns, node.id)] = node.summary.to_dict() if node.summary is not None else None
    return out


# --- the codec -------------------------------------------------------------------------------------------------

_texts = st.text(alphabet=st.characters(codec="utf-8", categories=("L", "N", "P", "Zs")), min_size=0, max_size=40)


@settings(max_examples=300, deadline=None)
@given(
    turns=st.dictionaries(st.integers(1, 6), st.tuples(st.sampled_from(["Ann", "user", "a: b"]), _texts), max_size=5),
    picks=st.lists(
        st.tuples(
            st.integers(1, 7),
            st.integers(0, 40),
            st.integers(0, 40),
            st.sampled_from(["", ".", "…", "x"]),
            st.sampled_from([None, "", "Bob: ", "Ann: "]),
            st.booleans(),
            _texts,
        ),
        max_size=8,
    ),
)
def test_a_packed_summary_reads_back_exactly_as_it_was_written(turns, picks) -> None:
    sentences = []
    for tid, a, b, suffix, prefix, literal, other in picks:
        speaker, text = turns.get(tid, ("Ann", other))
        body = other if literal else text[min(a, b) : max(a, b)]
        sentences.append([(f"{speaker}: " if prefix is None else prefix) + body + suffix, tid])
    facts = [sentences[0]] if sentences else []
    d = Summary.from_dict({"sentences": sentences, "key_facts": facts, "themes": ["x"], "summarizer": "s"}).to_dict()
    packed = pack(d, turns)
    assert Summary.from_dict(unpack(packed, turns)) == Summary.from_dict(d)
    assert unpack(packed, turns)["sentences"] == d["sentences"]


def test_a_quote_is_a_reference_only_into_a_turn_it_names_and_reads_back_the_same() -> None:
    turns = {7: ("Caroline", "Hi! I went to a support group yesterday. It was great")}
    d = {
        "sentences": [
            ["Caroline: I went to a support group yesterday.", 7],
            ["Caroline: It was great.", 7],  # the summarizer's full stop
            ["Caroline: I went to a support group yesterday.", 8],  # names another turn: stays text
            ["Ran pytest -q (2 failed).", 7, 1],  # an action line: stays text
        ],
        "key_facts": [0, ["Caroline: It was great.", 7]],
        "executive": None,
    }
    packed = pack(d, turns)
    assert packed["sentences"][:2] == [[7, 4, 36], [7, 41, 12, "."]]
    assert packed["sentences"][2:] == d["sentences"][2:]
    assert packed["key_facts"] == [0, [7, 41, 12, "."]] and "executive" not in packed
    assert unpack(packed, turns) == {k: v for k, v in d.items() if k != "executive"}


# --- real conversations on both backends -----------------------------------------------------------------------


def test_real_conversations_store_their_quotes_by_reference_and_read_back_the_same(where: str) -> None:
    """LoCoMo and a Claude Code transcript: most quotes are references, every summary reads as written."""
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:
        _fill(mem)
        written = _summaries(mem)
        # LoCoMo: every quote is a reference (main stored each as text), and the summaries take under half the bytes.
        raw = _raw(mem, "t")
        quotes = [e for text in raw for e in _entries(json.loads(text)) if len(e) == 2 or isinstance(e[0], int)]
        assert len(raw) >= 15 and quotes and all(isinstance(e[0], int) for e in quotes)
        full = [
            json.dumps(d, ensure_ascii=False, separators=(",", ":"))
            for (ns, _), d in written.items()
            if ns == "t" and d
        ]
        assert sum(len(t.encode()) for t in raw) < 0.5 * sum(len(t.encode()) for t in full)
        # The transcript: action lines stay text; most quotes of prose are references.
        quotes = [
            e for text in _raw(mem, "cc") for e in _entries(json.loads(text)) if len(e) == 2 or isinstance(e[0], int)
        ]
        assert sum(isinstance(e[0], int) for e in quotes) >= 0.6 * len(quotes) > 0
        # What the pyramid reads is the summary it wrote: compared with the summarizer's own output.
        for ns in ("t", "cc"):
            pyr = mem.for_namespace(ns).pyramid
            for node in pyr.nodes(level=1):
                if node.summary is not None and node.summary.summarizer == "extractive":
                    again = pyr.summarizer.summarize(pyr.expand(node.id), max_tokens=pyr.summary_budget(node))
                    assert node.summary == again
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:
        assert _summaries(mem) == written


def test_a_store_whose_summaries_hold_the_quoted_text_upgrades_without_losing_a_byte(where: str) -> None:
    """m027_compact_content: quotes become references; every summary reads the same before and after."""
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:
        _fill(mem)
        written = _summaries(mem)
        stored = {ns: _raw(mem, ns) for ns in ("t", "cc")}
        # The layout before m027: each summary stored as its JSON form, quotes as text.
        for (ns, node_id), d in written.items():
            if d is not None:
                body = json.dumps(d, ensure_ascii=False, separators=(",", ":"))
                key = (mem.store.sql.tenant_key(ns),)
                column = "namespace_id" if mem.store.backend == "sqlite" else "namespace"
                raw_rows(
                    mem.store, f"UPDATE nodes SET summary = %s WHERE {column} = %s AND id = %s", (body, *key, node_id)
                )
        raw_rows(mem.store, "DELETE FROM _stratamem_migrations WHERE name = 'm027_compact_content'")
        assert _summaries(mem) == written  # the old form reads as it always did
        assert not any(
            isinstance(e[0], int)
            for (t,) in raw_rows(mem.store, "SELECT summary FROM nodes WHERE summary IS NOT NULL")
            for e in _entries(json.loads(t))
        )
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:  # m027 runs
        assert ("m027_compact_content",) in raw_rows(mem.store, "SELECT name FROM _stratamem_migrations")
        assert _summaries(mem) == written
        assert {ns: _raw(mem, ns) for ns in ("t", "cc")} == stored  # what a new store writes, byte for byte
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:  # nothing left to do
        assert _summaries(mem) == written


# --- turns that leave the store --------------------------------------------------------------------------------


def test_a_purging_retention_writes_the_quoted_text_back_before_the_turns_go(tmp_path: Path) -> None:
    config = PYRAMID.replace(pyramid={"warm_max_turns": 0, "cold_retention_days": 1, "retention_purges_turns": True})
    with Memory(tmp_path / "p.db", namespace="t", config=config, embedder=None) as mem:
        for name, msgs in _locomo(4):
            mem.add(msgs, session=name)
        before = {n.id: n.summary for n in mem.pyramid.nodes()}
        report = apply_retention(mem.pyramid, now=mem.pyramid.clock() + timedelta(days=3))
        assert report.turns_deleted > 50
        assert {n.id: n.summary for n in mem.pyramid.nodes()} == before
        gone = set(range(1, report.turns_deleted + 1)) - {t.id for t in mem.turns()}
        raw = raw_rows(mem.store, "SELECT summary FROM nodes WHERE summary IS NOT NULL")
        # No stored reference names a purged turn; those that remain still quote by reference.
        refs = [e for (text,) in raw for e in _entries(json.loads(text)) if isinstance(e[0], int)]
        assert gone and refs and not {e[0] for e in refs} & gone


def test_a_forgotten_turn_leaves_no_reference_behind(where: str) -> None:
    with Memory(open_store(where), namespace="t", config=PYRAMID, embedder=None) as mem:
        for name, msgs in _locomo(3):
            mem.add(msgs, session=name)
        quoted = [
            e[0]
            for (t,) in raw_rows(mem.store, "SELECT summary FROM nodes WHERE summary IS NOT NULL")
            for e in _entries(json.loads(t))
            if isinstance(e[0], int)
        ]
        victim = quoted[len(quoted) // 2]
        mem.forget(turns=[victim])
        for node in mem.pyramid.nodes():  # every summary still reads; none names the forgotten turn
            assert node.summary is None or victim not in {s.turn_id for s in node.summary.sentences}
        raw = raw_rows(mem.store, "SELECT summary FROM nodes WHERE summary IS NOT NULL")
        assert victim not in {e[0] for (t,) in raw for e in _entries(json.loads(t)) if isinstance(e[0], int)}
