"""``check_derived`` finds a namespace consistent after any forget (issue 24, finding 8j).

Forget keeps sequence numbers: a forgotten turn leaves a gap in its
segment's range, a segment left without turns hands its span to a
neighbour. Neither is a provenance error. Both backends.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from pg import fresh_schema, schema_url

from stratamem import Config, Memory
from stratamem.store.open import open_store
from stratamem.testing.consistency import check_derived

CFG = Config().replace(
    pyramid={
        "micro_chunk_size": 4,
        "mini_chunk_size": 8,
        "macro_chunk_size": 16,
        "hot_chunks": 1,
        "summarizer": "extractive",
        "defer_summarization": False,
    }
)


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "c.db")
    dsn = request.getfixturevalue("pg_dsn")
    return schema_url(dsn, fresh_schema(dsn, "cd"))


def test_check_derived_is_clean_after_forgetting_turns_anywhere(target: str) -> None:
    with Memory(open_store(target), namespace="n", config=CFG, embedder=None) as mem:
        mem.add([{"role": "user" if i % 2 else "assistant", "content": f"turn {i}"} for i in range(40)], session="s")
        ids = {t.seq: t.id for t in mem.turns("s")}
        assert check_derived(mem).ok
        cases = {
            "mid-segment": [ids[6]],  # segment 5..8 keeps 5, 7, 8
            "at a boundary": [ids[12], ids[13]],  # the end of 9..12 and the start of 13..16
            "a whole segment": [ids[17], ids[18], ids[19], ids[20]],  # 17..20 goes to a neighbour
            "in the hot tail": [ids[39]],
        }
        for case, turn_ids in cases.items():
            mem.forget(turns=turn_ids)
            result = check_derived(mem)
            assert (case, result.ok, result.problems) == (case, True, ())
            assert (result.bad_provenance, result.gaps, result.overlaps) == (0, 0, 0)
        assert mem.status().turns == 32
