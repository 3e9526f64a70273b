"""Seed 000 (hierarchical memory pyramid), the rows issue 27's audit found short.

Each test reproduces the audit's finding on the code before the fix.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from stratamem import Config, ConfigError, Memory
from stratamem.errors import DecodeError
from stratamem.formats.ctf import decode_summaries, decode_turns, encode_turns
from stratamem.records import Turn

T0 = datetime(2026, 1, 15, 10, 0, tzinfo=UTC)


def _msgs(n: int) -> list[dict[str, str]]:
    return [
        {
            "role": "user" if i % 2 == 0 else "assistant",
            "content": f"Message {i} about the kiln schedule\twith a tab",
            "timestamp": (T0 + timedelta(minutes=i)).isoformat(),
        }
        for i in range(n)
    ]


def test_seed000_cold_format_ctf_keeps_the_turns_in_cold_segments(tmp_path: Path) -> None:
    """The audit: ``cold_format: summary_only | ctf`` was missing (an unknown key)."""
    small = {"micro_chunk_size": 5, "mini_chunk_size": 10, "macro_chunk_size": 30, "hot_chunks": 2}
    ctf_cfg = Config().replace(pyramid={**small, "warm_max_turns": 0, "cold_format": "ctf"})
    assert Config().pyramid.cold_format == "summary_only"
    with pytest.raises(ConfigError, match="cold_format"):
        Config().replace(pyramid={"cold_format": "json"})
    with Memory(tmp_path / "c.db", namespace="t", config=ctf_cfg, embedder=None) as mem:
        stored = mem.add(_msgs(47))
        cold = mem.pyramid.nodes(level=1, tier="cold")
        assert [n.id for n in cold] == [1, 2, 3, 4, 5, 6]
        fmt, content = mem.store.nodes.warm_content("t", cold[0].id)
        assert fmt == "ctf" and content.startswith("#CTF v1 turns n=5")
        assert cold[0].view_tokens == mem.tokenizer.count(content)
        # Expandable from the node itself, even with the archive gone.
        for path in (tmp_path / "c.db.archive").rglob("*"):
            if path.is_file():
                path.unlink()
        assert mem.pyramid.expansion(cold[0].id).sources == {cold[0].id: "warm"}
        assert mem.pyramid.expand(cold[0].id) == stored[:5]
    # The default keeps the summary only: the content lives in the archive.
    summary_cfg = Config().replace(pyramid={**small, "warm_max_turns": 0})
    with Memory(tmp_path / "s.db", namespace="t", config=summary_cfg, embedder=None) as mem:
        mem.add(_msgs(47))
        first = mem.pyramid.nodes(level=1, tier="cold")[0]
        assert mem.store.nodes.warm_content("t", first.id) is None
        assert mem.pyramid.expansion(first.id).sources == {first.id: "archive"}


SEED_EXAMPLE = (
    "#CTF v1 turns=2 fields=role,content,timestamp,model\n"
    "user\twho are you\t2026-01-15T16:20:06\t-\n"
    "assistant\tI'm an AI language model...\t2026-01-15T16:20:09\tgpt-4o"
)


def test_seed000_the_seeds_own_ctf_example_decodes() -> None:
    """The audit: seed 000's CTF example (``turns=N fields=…``, full role names) did not decode."""
    turns = decode_turns(SEED_EXAMPLE)
    assert turns == [
        Turn("user", "who are you", timestamp=datetime(2026, 1, 15, 16, 20, 6, tzinfo=UTC)),
        Turn(
            "assistant",
            "I'm an AI language model...",
            timestamp=datetime(2026, 1, 15, 16, 20, 9, tzinfo=UTC),
            model="gpt-4o",
        ),
    ]
    # Its escapes: U+2409 is a TAB, U+240A a line feed; the other example of the seed decodes too.
    other = (
        "#CTF v1 turns=2 fields=role,content,timestamp,model\n"
        "user\thello\u2409world\u240anext line\t2026-01-15T10:00:00\t-\n"
        "assistant\thi there\t2026-01-15T10:00:01\tgpt-4o\n"
    )
    assert [t.text for t in decode_turns(other)] == ["hello\tworld\nnext line", "hi there"]
    # We still write our own dialect; what we read, we write back losslessly.
    assert encode_turns(turns).startswith("#CTF v1 turns n=2")
    assert decode_turns(encode_turns(turns)) == turns
    # The seed's summary listing.
    rows = decode_summaries(
        "#CTF v1 type=summaries count=2 fields=chunk_id,turn_range,summary,themes\n"
        "micro_abc123\t0-10\tUser introduced themselves as lb\tidentity|capabilities\n"
        "micro_def456\t10-20\tTested file creation limitations\ttools|limitations\n"
    )
    assert [(r.id, r.first, r.last, r.themes) for r in rows] == [
        ("micro_abc123", 0, 10, ("identity", "capabilities")),
        ("micro_def456", 10, 20, ("tools", "limitations")),
    ]


@pytest.mark.parametrize(
    ("doc", "line"),
    [
        ("#CTF v1 turns=2 fields=role,content,timestamp,model\nuser\thi\t2026-01-15T10:00:00\t-", 3),  # 1 row of 2
        ("#CTF v1 turns=1 fields=role,content\nrobot\thi", 2),  # unknown role
        ("#CTF v1 turns=1 fields=role,content,timestamp\nuser\thi\tyesterday", 2),  # bad time
        ("#CTF v1 turns=1 fields=role,content\nuser\thi\textra", 2),  # a cell too many
        ("#CTF v1 turns=1 fields=role,timestamp\nuser\t2026-01-15T10:00:00", 1),  # no content field
    ],
)
def test_seed000_seed_dialect_is_read_strictly(doc: str, line: int) -> None:
    with pytest.raises(DecodeError) as info:
        decode_turns(doc)
    assert info.value.line == line


def test_seed000_embedding_model_for_the_local_provider_is_never_silently_ignored() -> None:
    """The audit: ``embedding.model`` set for the local provider was silently ignored."""
    with pytest.raises(ConfigError, match="embedding.model: the local provider runs only all-MiniLM-L6-v2"):
        Config.from_dict({"embedding": {"provider": "local", "model": "bge-small-en"}})
    for key, value in (("base_url", "http://127.0.0.1:9/v1"), ("dimensions", 768)):
        with pytest.raises(ConfigError, match=f"embedding.{key} applies to the openai provider only"):
            Config.from_dict({"embedding": {key: value}})
    # The model it runs, by either name, and any model for the openai provider, are accepted.
    assert (
        Config.from_dict({"embedding": {"model": "sentence-transformers/all-MiniLM-L6-v2"}}).embedding.provider
        == "local"
    )
    assert Config.from_dict({"embedding": {"provider": "openai", "model": "bge-small-en", "dimensions": 384}})
