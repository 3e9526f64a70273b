"""The zstd cold archive: round trips, confinement (no '..', absolute paths or symlinks),
corruption detection, and retention."""

from __future__ import annotations

import os
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from stratamem import Config, Memory
from stratamem.errors import ArchiveError, BackendError
from stratamem.pyramid.archive import Archive
from stratamem.pyramid.retention import apply_retention

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)


def msgs(n: int) -> list[dict]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i}: the Huila lot {i} costs {i * 3} euros, shipped on May {i % 28 + 1}.",
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i in range(n)
    ]


def test_frames_round_trip_and_references_point_at_them(tmp_path: Path):
    arc = Archive(tmp_path / "arc", "ns")
    r1 = arc.write({1: [{"a": 1}], 2: [{"b": "ü"}]}, day=date(2024, 5, 1))
    r2 = arc.write({3: [{"c": 3}]}, day=date(2024, 5, 1))
    assert r1.startswith("2024-05-01.jsonl.zst@0+")
    assert r2.startswith(f"2024-05-01.jsonl.zst@{int(r1.split('+')[1])}+")
    assert arc.read(r1) == {1: [{"a": 1}], 2: [{"b": "ü"}]}
    assert arc.read_node(r2, 3) == [{"c": 3}]
    with pytest.raises(ArchiveError, match="holds no node 9"):
        arc.read_node(r2, 9)
    assert [p.name for p in arc.files()] == ["2024-05-01.jsonl.zst"]


@pytest.mark.parametrize(
    "ref",
    [
        "../2024-05-01.jsonl.zst@0+10",
        "/etc/passwd",
        "/tmp/2024-05-01.jsonl.zst@0+10",
        "2024-05-01.jsonl.zst/../../x@0+1",
        "sub/2024-05-01.jsonl.zst@0+10",
        "2024-05-01.jsonl.zst",
        "2024-05-01.jsonl.zst@-1+5",
        "",
    ],
)
def test_references_that_are_not_plain_archive_entries_are_refused(tmp_path: Path, ref: str):
    arc = Archive(tmp_path / "arc", "ns")
    arc.write({1: []}, day=date(2024, 5, 1))
    with pytest.raises(ArchiveError, match="invalid archive reference"):
        arc.read(ref)


def test_a_symlinked_archive_file_is_refused(tmp_path: Path):
    secret = tmp_path / "secret.bin"
    secret.write_bytes(b"top secret" * 10)
    arc = Archive(tmp_path / "arc", "ns")
    arc.write({1: []}, day=date(2024, 5, 1))
    os.symlink(secret, arc.dir / "2024-05-02.jsonl.zst")
    with pytest.raises(ArchiveError, match="symbolic link"):
        arc.read("2024-05-02.jsonl.zst@0+10")


def test_a_symlinked_namespace_directory_is_refused(tmp_path: Path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (tmp_path / "arc").mkdir()
    os.symlink(elsewhere, tmp_path / "arc" / "ns")
    arc = Archive(tmp_path / "arc", "ns")
    with pytest.raises(ArchiveError, match="symbolic link"):
        arc.write({1: []}, day=date(2024, 5, 1))


def test_corrupt_truncated_and_missing_frames_raise_archive_error(tmp_path: Path):
    arc = Archive(tmp_path / "arc", "ns")
    ref = arc.write({1: [{"x": "y" * 200}]}, day=date(2024, 5, 1))
    path = arc.dir / "2024-05-01.jsonl.zst"
    size = int(ref.split("+")[1])
    with pytest.raises(ArchiveError, match="truncated"):
        arc.read(f"2024-05-01.jsonl.zst@0+{size + 5}")
    data = bytearray(path.read_bytes())
    data[size // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(ArchiveError, match="corrupt"):
        arc.read(ref)
    with pytest.raises(ArchiveError, match="missing"):
        arc.read("2030-01-01.jsonl.zst@0+10")


def _memory(tmp_path: Path, **pyramid) -> Memory:
    # Warm holds the newest 10 turns' segments: with hot_chunks=2 (10 turns) every older segment is cold.
    config = Config().replace(
        pyramid={"micro_chunk_size": 5, "mini_chunk_size": 10, "macro_chunk_size": 20, "warm_max_turns": 10, **pyramid}
    )
    return Memory(tmp_path / "m.db", namespace="t", config=config, embedder=None)


def test_cold_segments_expand_from_the_archive(tmp_path: Path):
    mem = _memory(tmp_path)
    stored = mem.add(msgs(32))
    cold = mem.pyramid.nodes(level=1, tier="cold")
    assert len(cold) == 4
    for n in cold:
        assert n.archive_ref is not None
        assert mem.pyramid.expand(n.id) == [s for s in stored if s.id in set(mem.pyramid.turn_ids(n.id))]
        assert n.view_tokens is not None and n.view_tokens < n.tokens


def test_retention_expires_archived_content_but_keeps_summaries_and_turns(tmp_path: Path):
    mem = _memory(tmp_path, cold_retention_days=90)
    stored = mem.add(msgs(32))
    cold = mem.pyramid.nodes(level=1, tier="cold")
    today = mem.pyramid.clock()
    # Not yet due: nothing changes.
    report = apply_retention(mem.pyramid, now=today + timedelta(days=30))
    assert (report.nodes, report.files) == (0, ())
    report = apply_retention(mem.pyramid, now=today + timedelta(days=92))
    assert report.nodes == len(cold) and len(report.files) == 1 and report.turns_deleted == 0
    assert mem.pyramid.archive.files() == []
    for n in cold:
        after = mem.pyramid.node(n.id)
        assert after.archive_ref is None and after.summary == n.summary
        # The canonical turns are still in the store, so the node still expands.
        assert mem.pyramid.expand(n.id) == [s for s in stored if s.id in set(mem.pyramid.turn_ids(n.id))]


def test_retention_can_purge_canonical_turns_leaving_summaries_and_provenance(tmp_path: Path):
    mem = _memory(tmp_path, cold_retention_days=1, retention_purges_turns=True)
    mem.add(msgs(32))
    cold = mem.pyramid.nodes(level=1, tier="cold")
    report = apply_retention(mem.pyramid, now=mem.pyramid.clock() + timedelta(days=3))
    assert report.turns_deleted == 20
    assert len(mem.turns()) == 12
    node = mem.pyramid.node(cold[0].id)
    assert node.summary is not None and len(mem.pyramid.turn_ids(node.id)) == 5
    with pytest.raises(ArchiveError, match="deleted by retention"):
        mem.pyramid.expand(node.id)


def test_zero_retention_days_keeps_everything_forever(tmp_path: Path):
    mem = _memory(tmp_path, cold_retention_days=0)
    mem.add(msgs(32))
    report = apply_retention(mem.pyramid, now=mem.pyramid.clock() + timedelta(days=10_000))
    assert (report.cutoff, report.nodes, report.files) == (None, 0, ())
    assert len(mem.pyramid.archive.files()) == 1


# --- review findings: one instant for the file day and archived_at; files go only when unreferenced ----------


def _clocked(tmp_path: Path, clock, **pyramid) -> Memory:
    """A Memory whose pyramid runs on an injected clock (the archive day and archived_at both follow it)."""
    from stratamem.pyramid.consolidate import Pyramid

    config = Config().replace(
        pyramid={"micro_chunk_size": 2, "hot_chunks": 1, "warm_max_age_hours": 1, "cold_retention_days": 30, **pyramid}
    )
    mem = Memory(tmp_path / "m.db", namespace="t", config=config, embedder=None)
    mem._derived._pyramid = Pyramid(
        mem.store,
        mem.namespace,
        config=config,
        tokenizer=mem.tokenizer,
        events=mem.events,
        archive_dir=tmp_path / "m.db.archive",
        clock=clock,
    )
    return mem


def _daily(n: int, start: datetime) -> list[dict]:
    return [
        {"role": "user", "content": f"turn {i} about lot {i}", "timestamp": (start + timedelta(days=i)).isoformat()}
        for i in range(n)
    ]


def test_nodes_expire_with_the_file_their_clock_named(tmp_path: Path):
    # Reviewer repro t7: the clock says 2020-01-01 while the machine's now is years later.
    mem = _clocked(tmp_path, lambda: datetime(2020, 1, 1, tzinfo=UTC))
    for m in _daily(8, datetime(2019, 12, 1, tzinfo=UTC)):
        mem.add(m)
    cold = mem.pyramid.nodes(level=1, tier="cold")
    assert [n.archive_ref.split("@")[0] for n in cold] == ["2020-01-01.jsonl.zst"] * 3
    report = apply_retention(mem.pyramid, now=datetime(2020, 6, 1, tzinfo=UTC))
    assert (report.files, report.nodes) == (("2020-01-01.jsonl.zst",), 3)
    for n in cold:
        assert mem.pyramid.node(n.id).archive_ref is None
        got = mem.pyramid.expansion(n.id)
        assert [t.id for t in got.turns] == mem.pyramid.turn_ids(n.id)
        assert (got.sources, got.fallbacks) == ({n.id: "turns"}, {})


def test_retention_keeps_a_file_while_any_node_still_refers_to_it(tmp_path: Path):
    now = [datetime(2020, 1, 1, tzinfo=UTC)]
    mem = _clocked(tmp_path, lambda: now[0])
    for m in _daily(6, datetime(2019, 12, 1, tzinfo=UTC)):
        mem.add(m)
    now[0] = datetime(2020, 3, 1, tzinfo=UTC)
    for m in _daily(4, datetime(2020, 2, 1, tzinfo=UTC)):
        mem.add(m)
    refs = {n.id: n.archive_ref for n in mem.pyramid.nodes(level=1, tier="cold")}
    assert sorted({r.split("@")[0] for r in refs.values()}) == ["2020-01-01.jsonl.zst", "2020-03-01.jsonl.zst"]
    jan = [i for i, r in refs.items() if r.startswith("2020-01-01")]
    # A node whose archived_at is later than its file's day (written before the fix) keeps the file alive.
    late = jan[0]
    node = mem.pyramid.node(late)
    mem.store.nodes.set_tier(
        "t",
        late,
        "cold",
        at=datetime(2020, 2, 10, tzinfo=UTC),
        view_tokens=node.view_tokens,
        archive_ref=node.archive_ref,
    )
    report = apply_retention(mem.pyramid, now=datetime(2020, 2, 15, tzinfo=UTC))
    assert (report.nodes, report.files) == (len(jan) - 1, ())
    assert [p.name for p in mem.pyramid.archive.files()] == ["2020-01-01.jsonl.zst", "2020-03-01.jsonl.zst"]
    assert mem.pyramid.expansion(late).sources == {late: "archive"}
    # Once its last reference expires, the January file goes; March's stays with its nodes.
    report = apply_retention(mem.pyramid, now=datetime(2020, 3, 20, tzinfo=UTC))
    assert (report.nodes, report.files) == (1, ("2020-01-01.jsonl.zst",))
    assert [p.name for p in mem.pyramid.archive.files()] == ["2020-03-01.jsonl.zst"]
    march = [i for i, r in refs.items() if r.startswith("2020-03-01")]
    assert all(mem.pyramid.expansion(i).sources == {i: "archive"} for i in march)


def test_a_failed_store_transaction_deletes_no_archive_file(tmp_path: Path):
    mem = _clocked(tmp_path, lambda: datetime(2020, 1, 1, tzinfo=UTC), retention_purges_turns=True)
    for m in _daily(8, datetime(2019, 12, 1, tzinfo=UTC)):
        mem.add(m)
    before = {n.id: n.archive_ref for n in mem.pyramid.nodes(level=1, tier="cold")}
    with mem.store.lock:  # a real database refusal half-way through retention
        mem.store.connection.execute(
            "CREATE TRIGGER no_purge BEFORE DELETE ON turns BEGIN SELECT RAISE(ABORT, 'turns are on legal hold'); END"
        )
    with pytest.raises(BackendError, match="legal hold"):
        apply_retention(mem.pyramid, now=datetime(2020, 6, 1, tzinfo=UTC))
    assert [p.name for p in mem.pyramid.archive.files()] == ["2020-01-01.jsonl.zst"]
    assert {n.id: n.archive_ref for n in mem.pyramid.nodes(level=1, tier="cold")} == before
    assert all(mem.pyramid.expansion(i).sources == {i: "archive"} for i in before)


def test_an_old_file_nothing_refers_to_is_deleted(tmp_path: Path):
    mem = _clocked(tmp_path, lambda: datetime(2020, 1, 1, tzinfo=UTC))
    for m in _daily(8, datetime(2019, 12, 1, tzinfo=UTC)):
        mem.add(m)
    orphan = mem.pyramid.archive.write({99: []}, day=date(2019, 6, 1))  # e.g. its transaction rolled back
    report = apply_retention(mem.pyramid, now=datetime(2020, 1, 20, tzinfo=UTC))
    assert (report.nodes, report.files) == (0, (orphan.split("@")[0],))
    assert [p.name for p in mem.pyramid.archive.files()] == ["2020-01-01.jsonl.zst"]


def test_expand_reads_the_canonical_turns_when_the_archive_file_is_gone_and_says_so(tmp_path: Path):
    mem = _memory(tmp_path)
    stored = mem.add(msgs(32))
    [first, *_] = mem.pyramid.nodes(level=1, tier="cold")
    for p in mem.pyramid.archive.files():
        p.unlink()
    fallbacks = []
    mem.events.subscribe("expand.fallback", fallbacks.append)
    got = mem.pyramid.expansion(first.id)
    assert got.turns == [s for s in stored if s.id in set(mem.pyramid.turn_ids(first.id))]
    assert got.sources == {first.id: "turns"}
    assert got.fallbacks[first.id].startswith("ArchiveError: archived content for ")
    assert [(e.data["node_id"], e.data["error"]) for e in fallbacks] == [(first.id, "ArchiveError")]
    macro = mem.pyramid.nodes(level=3)[0]
    assert set(mem.pyramid.expansion(macro.id).fallbacks) == {n.id for n in mem.pyramid.nodes(level=1, tier="cold")}


def test_a_segment_whose_content_is_gone_everywhere_is_marked_failed_not_raised(tmp_path: Path):
    from stratamem.pyramid.consolidate import Pyramid

    mem = _memory(tmp_path, auto_summarize=False, retention_purges_turns=True, cold_retention_days=1)
    mem.add(msgs(32))
    apply_retention(mem.pyramid, now=mem.pyramid.clock() + timedelta(days=3))
    cold = mem.pyramid.nodes(level=1, tier="cold")
    assert [n.summary_status for n in cold] == ["pending"] * 4
    eager = Pyramid(
        mem.store,
        "t",
        config=mem.config.replace(pyramid={"auto_summarize": True}),
        tokenizer=mem.tokenizer,
        archive_dir=tmp_path / "m.db.archive",
    )
    failed = []
    eager.events.subscribe("summarizer.failed", failed.append)
    eager.summarize_pending()
    after = [eager.node(n.id) for n in cold]
    assert [(n.summary_status, n.summary) for n in after] == [("failed", None)] * 4
    assert after[0].summary_error.startswith("turns unavailable: ArchiveError: node ")
    assert sorted(e.data["node_id"] for e in failed) == sorted(n.id for n in cold)
