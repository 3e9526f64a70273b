"""The zstd cold archive: round trips, confinement (no '..', absolute paths or symlinks),
corruption detection, and retention."""

from __future__ import annotations

import os
from datetime import date, datetime, timedelta, timezone
from pathlib import Path

import pytest

from stratamem import Config, Memory
from stratamem.archive import Archive
from stratamem.errors import ArchiveError
from stratamem.retention import apply_retention

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=timezone.utc)


def msgs(n: int) -> list[dict]:
    return [{"role": "user" if i % 2 == 0 else "assistant",
             "content": f"Message {i}: the Huila lot {i} costs {i * 3} euros, shipped on May {i % 28 + 1}.",
             "timestamp": (T0 + timedelta(minutes=i)).isoformat()} for i in range(n)]


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


@pytest.mark.parametrize("ref", [
    "../2024-05-01.jsonl.zst@0+10",
    "/etc/passwd",
    "/tmp/2024-05-01.jsonl.zst@0+10",
    "2024-05-01.jsonl.zst/../../x@0+1",
    "sub/2024-05-01.jsonl.zst@0+10",
    "2024-05-01.jsonl.zst",
    "2024-05-01.jsonl.zst@-1+5",
    "",
])
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
    config = Config().replace(pyramid={"micro_chunk_size": 5, "mini_chunk_size": 10, "macro_chunk_size": 20,
                                       **pyramid})
    return Memory(tmp_path / "m.db", namespace="t", config=config)


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
