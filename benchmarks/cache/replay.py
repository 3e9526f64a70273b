"""The replay worker: one source tree, call by call, every prompt serialized and billed.

Run by ``benchmarks/cache_bench.py`` in a subprocess whose ``PYTHONPATH`` names
the tree under test (this checkout's ``src``, an extracted ``--baseline``
revision or a ``--src`` path), so old and new code are measured by the same
benchmark code in one table. It writes one JSON file; the parent prints.

Arms, each a sequence of model calls with its prompts:

* ``assembly`` — ``Memory.context(query, budget=B, session=..., format=F)`` of the
  tree (with any ``--set`` configuration), after each user turn is added
  (LoCoMo) or before each assistant message (agent transcript: every model
  call of the tool loop). The query is that user turn (LoCoMo) or the latest
  user request (agent transcript).
* ``whole history`` — every turn so far, rendered by the tree's
  ``stratamem.providers`` (LoCoMo) or the transcript's messages as they are
  (agent): append-only, so perfectly prefix-stable, and unbounded.
* ``wrap`` (agent transcript only) — what ``stratamem.wrap(client)`` sends:
  ``LoopSession.before`` on the caller's whole list (the live list pruned and
  compacted, with our breakpoints when ``compaction.cache_aware`` is on), thresholds
  as in ``agentloop_bench.py``; the
  checkpoint is written by ``checkpoint_reply`` on ``FakeLLMServer`` through the
  real ``openai`` client (not a language model). The checkpoint calls' input
  tokens are counted (``summarizer``) and billed at the agent model's uncached
  input price: a compaction is a model call too.

Cache lifetime: LoCoMo sessions are days apart, beyond any TTL, so the
provider caches are emptied at each new session (the prefix share is still
measured against the previous call, whatever the session). The agent's calls
are seconds apart: one cache for the whole transcript.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "data"))

from benchmarks.cache.billing import PRICES, AnthropicCache, OpenAICache  # noqa: E402
from benchmarks.cache.request import Request, Serializer, lcp, rolling_breakpoints  # noqa: E402

LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
AGENT_EMBEDDINGS = Path("/tmp/stratamem-agent-embeddings.npz")
WRAP_MODELS = {"anthropic": "claude-sonnet-4-6", "openai": "gpt-4.1"}
"""The model a wrapped client calls in the ``wrap`` arm (its minimum cacheable length decides breakpoints)."""
MIN_LENGTHS = sorted({p.min_tokens for p in PRICES.values() if p.provider == "anthropic"})


_STABILITY = {
    "system_prompt": 0,
    "always_included": 1,
    "hot_item": 2,
    "summary": 3,
    "recent_window": 4,
    "expanded": 5,
    "recalled": 6,
    "recalled_item": 7,
}
"""Order in which units new to a call are appended in the reorder bound (most stable kinds first)."""


def _num(uid: str) -> tuple[str, int]:
    kind, _, rest = uid.partition(":")
    return kind, int(rest) if rest.isdigit() else 0


class Tracker:
    """Prefix and cache arithmetic of one arm's call sequence (one conversation, budget, format)."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.calls = self.tokens = self.lcp = 0
        self.shares: list[float] = []
        self.lcps: list[int] = []
        self.compactions = 0
        self.summarizer = 0
        self.no_window = 0
        self.unseen = 0
        self.parts: Counter[str] = Counter()
        self.carried: Counter[str] = Counter()
        self.chain = self.unit_tokens = 0
        self._order: list[str] = []
        self._units: dict[str, int] = {}
        self.where: Counter[str] = Counter()
        self.causes: Counter[str] = Counter()
        self.lost: Counter[str] = Counter()
        self.uncached: Counter[str] = Counter()
        self._cache: dict[str, Any] | None = None
        self.breakpoints = 0
        self._prev: Request | None = None
        self._scope: object = None
        self._openai = OpenAICache()
        self.openai_cached = 0
        self._anth = {(m, p): AnthropicCache(m) for m in MIN_LENGTHS for p in ("sent", "rolling")}
        self.anth = {f"{m}/{p}": [0, 0, 0] for m in MIN_LENGTHS for p in ("sent", "rolling")}

    def call(
        self,
        req: Request,
        scope: object,
        manifest: Any = None,
        newest: set[int] | None = None,
        newest_turns: Sequence[Any] = (),
    ) -> None:
        """Account one request; ``scope`` changes when the provider caches have expired.

        ``manifest``: the context's, whose item tokens are summed by reason (what the prompt is made of).
        ``newest``: ids of the turns stored since the previous call (the user's message or the tool
        results the model has not seen yet): a call whose prompt lacks one of them counts as ``unseen``.
        ``newest_turns``: those turns' records (a person's words among them: a request boundary).
        """
        if manifest is not None:
            self._reorder_bound(manifest)
            self.no_window += not any(item.reason == "recent_window" for item in manifest.items)
            if newest:
                shown = {t for item in manifest.items for t in item.turn_ids}
                self.unseen += not newest <= shown
        if scope != self._scope:
            self._scope = scope
            self._openai.reset()
            for c in self._anth.values():
                c.reset()
        n = lcp(req.tokens, self._prev.tokens) if self._prev is not None else 0
        self.calls += 1
        self.tokens += len(req)
        self.lcp += n
        self.shares.append(n / max(1, len(req)))
        self.lcps.append(n)
        if self._prev is None:
            self.where["first call"] += 1
        elif n == len(self._prev) and len(req) > n:
            self.where["appended (the previous request is a prefix)"] += 1
        else:
            self.where[req.where(n)] += 1
        if self._prev is not None:
            cause = _cause(self._cache, getattr(manifest, "cache", None))
            self.causes[cause] += 1
            self.lost[cause] += len(req) - n
            for kind, tokens in _uncached(self._prev, req, n).items():
                self.uncached[f"{_boundary(newest_turns)}|{cause}|{kind}"] += tokens
        self._cache = getattr(manifest, "cache", None)
        self._prev = req
        if self.fmt == "openai":
            self.openai_cached += self._openai.cached(req)
            return
        own = req.breakpoints
        self.breakpoints += len(own)
        for (m, policy), cache in self._anth.items():
            # "sent": the request as the tree sends it (no cache_control: no caching at all);
            # "rolling": what a caller adds when the tree sends none (end of system + last block).
            bps = own if policy == "sent" or own else rolling_breakpoints(req)
            got = cache.bill(req, bps)
            acc = self.anth[f"{m}/{policy}"]
            for i in range(3):
                acc[i] += got[i]

    def _reorder_bound(self, manifest: Any) -> None:
        """What the same selection would keep as a prefix if laid out append-only.

        The units of this call (manifest items) are matched against the previous call's
        order: the leading run of units still present is the prefix a cache-ordered layout
        of today's *selection* (not a new selection) could keep; the units new to this call
        follow, ordered by how stable their kind is (instructions, state, hot items,
        summaries, window turns, then per-query units), each kind oldest first. Unit
        renderings are taken as stable (today's dedup edits and excerpts are not), so this
        is an upper bound of reordering alone.
        """
        units = {item.id: item.tokens for item in manifest.items}
        reasons = {item.id: item.reason for item in manifest.items}
        for uid, tokens in units.items():
            self.parts[reasons[uid]] += tokens
            if uid in self._units:
                self.carried[reasons[uid]] += tokens
        keep: list[str] = []
        for uid in self._order:
            if uid not in units:
                break
            keep.append(uid)
        self.chain += sum(units[u] for u in keep)
        self.unit_tokens += sum(units.values())
        kept = set(keep)
        rest = sorted((u for u in units if u not in kept), key=lambda u: (_STABILITY.get(reasons[u], 9), _num(u)))
        self._order = keep + rest
        self._units = units

    def summary(self) -> dict[str, Any]:
        """The sums the parent turns into tables (JSON-ready)."""
        return {
            "calls": self.calls,
            "tokens": self.tokens,
            "lcp": self.lcp,
            "share_median": statistics.median(self.shares) if self.shares else 0.0,
            "lcp_median": statistics.median(self.lcps[1:]) if len(self.lcps) > 1 else 0,
            "compactions": self.compactions,
            "summarizer": self.summarizer,
            "no_window": self.no_window,
            "unseen": self.unseen,
            "where": dict(self.where),
            "causes": dict(self.causes),
            "lost": dict(self.lost),
            "uncached": dict(self.uncached),
            "openai_cached": self.openai_cached,
            "anthropic": self.anth,
            "breakpoints": self.breakpoints,
            "parts": dict(self.parts),
            "carried": dict(self.carried),
            "chain": self.chain,
            "unit_tokens": self.unit_tokens,
        }


RECALL_PREFIX = "## Recalled for this message"
"""The per-call block's title (``context/cache_render.RECALL_TITLE``; the text is matched, the code not imported)."""


def _boundary(turns: Sequence[Any]) -> str:
    """``request`` when a person's words arrived since the previous call, ``step`` when only tool results
    did (a tool loop's next call), ``call`` when the replay does not say (LoCoMo: every call a message)."""
    if not turns:
        return "call"
    return "request" if any(st.role == "user" for st in turns) else "step"


def _uncached(prev: Request, req: Request, n: int) -> Counter[str]:
    """The tokens of ``req`` past its common prefix ``n`` with ``prev``, by what they are.

    Per message (a header goes with its message; OpenAI's leading system message and Anthropic's
    system blocks are one piece each): ``recall block`` (a piece that opens with the per-call title),
    ``system / ledger`` (system text: instructions, state, the ledger), ``re-sent`` (a piece the
    previous prompt also held, sent again because something before it changed) and ``new`` (a
    piece the previous prompt did not hold: the newest turns, or an old turn shown anew).
    """
    seen = set(prev.texts)
    out: Counter[str] = Counter()
    starts = [0, *map(int, req.ends[:-1])]
    kinds: list[str] = []
    for label, text in zip(req.labels, req.texts, strict=True):
        if text.startswith(RECALL_PREFIX):
            kinds.append("recall block")
        elif label == "system" or (label.startswith("msg[0].system") and not label.endswith("header")):
            kinds.append("system / ledger")
        elif label.endswith("header"):
            kinds.append("")  # decided by its message's first content piece
        else:
            kinds.append("re-sent" if text in seen else "new")
    for i in range(len(kinds) - 1, -1, -1):
        if not kinds[i]:
            kinds[i] = kinds[i + 1] if i + 1 < len(kinds) and kinds[i + 1] else "new"
    for start, end, kind in zip(starts, map(int, req.ends), kinds, strict=True):
        if end > n:
            out[kind] += end - max(start, n)
    return out


def _cause(prev: Mapping[str, Any] | None, cur: Mapping[str, Any] | None) -> str:
    """Why a call's prefix differs from the previous call's, from the two manifests' ``cache`` accounts.

    The first of: no cache layout; a question (either call assembled without the layout); the
    standing layers (instructions, state) changed; the ledger changed; the window's anchor moved;
    else the per-call part (the previous call's L4 and the turns after it: what always changes).
    """
    if not prev or not cur:
        return "no cache layout"
    if prev.get("deviation") or cur.get("deviation"):
        return "question (assembled without the layout)"
    ph, ch = prev.get("layer_hashes") or {}, cur.get("layer_hashes") or {}
    if any(ph.get(k) != ch.get(k) for k in ("instructions", "state")):
        return "standing layers changed"
    if ph.get("ledger") != ch.get("ledger"):
        return "ledger changed"
    if (prev.get("anchor") or {}).get("turn") != (cur.get("anchor") or {}).get("turn"):
        return "window start moved"
    return "per call (L4, newest turns)"


def _config(sets: Mapping[str, Any]) -> Any:
    from stratamem import Config

    nested: dict[str, dict[str, Any]] = {}
    top: dict[str, Any] = {}
    for key, value in sets.items():
        section, _, name = key.partition(".")
        if name:
            nested.setdefault(section, {})[name] = value
        else:
            top[key] = value
    return Config().replace(**nested, **top) if (nested or top) else Config()


def _embedder(kind: str, path: Path | None) -> Any:
    """``None`` (lexical recall) or the local MiniLM behind the benchmarks' /tmp vector cache."""
    if kind == "none":
        return None
    from benchmarks.locomo.embedcache import CACHE, cached_embedder

    return cached_embedder(path or CACHE)


def _request(ctx: Any) -> tuple[Any, list[dict[str, Any]]]:
    """``(system, messages)`` of an assembled context, as a caller sends it."""
    return ctx.system, list(ctx.messages)


# --- LoCoMo --------------------------------------------------------------------------------------


def replay_locomo(
    pos: int, args: argparse.Namespace, ser: Serializer, rows: list[dict[str, Any]], recall: dict[str, Any]
) -> None:
    """Replay LoCoMo conversation ``pos`` turn by turn; append its rows and its recall."""
    from benchmarks.locomo.metrics import recall_frac
    from benchmarks.locomo.protocol import normalise_evidence
    from stratamem import Memory
    from stratamem.ingest import read_file
    from stratamem.providers import to_anthropic, to_openai

    raw = json.loads(LOCOMO.read_text(encoding="utf-8"))[pos]
    ns = f"locomo-{raw['sample_id']}"
    sessions = [s for s in read_file(LOCOMO, fmt="locomo") if str(s.namespace) == ns]
    if args.sessions:
        sessions = sessions[: args.sessions]
    embedder = _embedder(args.embed, None)
    track: dict[tuple[str, int | None, str], Tracker] = {}

    def tracker(arm: str, budget: int | None, fmt: str) -> Tracker:
        return track.setdefault((arm, budget, fmt), Tracker(fmt))

    def scope(session: Any) -> object:
        # Sessions are days apart: a new session finds every provider cache expired.
        return "all" if args.one_cache else session.session

    dia_of: dict[int, str] = {}
    newest: set[int] = set()  # turns stored since the previous call
    history = []
    with tempfile.TemporaryDirectory() as tmp:
        mem = Memory(Path(tmp) / "replay.db", namespace=ns, config=_config(args.set), embedder=embedder)
        for s in sessions:
            for turn in s.turns:
                for st in mem.add(turn, session=s.session):
                    dia_of[st.id] = str(st.turn.metadata.get("dia_id"))
                    newest.add(st.id)
                history.append(turn)
                if turn.role != "user":
                    continue
                for budget in args.budgets:
                    for fmt in args.formats:
                        ctx = mem.context(turn.text, budget=budget, session=s.session, format=fmt)
                        tracker("assembly", budget, fmt).call(
                            ser.request(*_request(ctx)), scope(s), ctx.manifest, newest
                        )
                newest = set()
                if args.whole:
                    for fmt in args.formats:
                        system, msgs = (None, to_openai(history)) if fmt == "openai" else to_anthropic(history)
                        tracker("whole history", None, fmt).call(ser.request(system, msgs), scope(s))
        if args.recall:
            known = set(dia_of.values())
            scores = []
            for qa in raw.get("qa", []):
                gold = normalise_evidence(qa.get("evidence") or [], known)
                if not gold:
                    continue
                ctx = mem.context(str(qa["question"]), budget=2048, format="text", policy="hybrid")
                kept = {
                    dia_of[t]
                    for item in ctx.manifest.items
                    if item.kind == "turn"
                    for t in item.turn_ids
                    if t in dia_of
                }
                scores.append(recall_frac(gold, kept))
            recall[str(raw["sample_id"])] = {"n": len(scores), "b@2048": sum(scores) / max(1, len(scores))}
        mem.close()
    if embedder is not None:
        embedder.save()
    for (arm, budget, fmt), t in track.items():
        rows.append(
            {
                "dataset": "locomo",
                "conv": str(raw["sample_id"]),
                "arm": arm,
                "budget": budget,
                "format": fmt,
                **t.summary(),
            }
        )
    ser.clear()


# --- the agent-loop transcript -----------------------------------------------------------------------


def replay_agent(args: argparse.Namespace, ser: Serializer, rows: list[dict[str, Any]]) -> None:
    """Replay the agent transcript model call by model call on every arm."""
    from make_agent_transcript import messages as transcript

    from stratamem import Memory
    from stratamem.agentloop import Compactor
    from stratamem.agentloop.loop_session import LoopSession
    from stratamem.config import CompactionConfig
    from stratamem.llm import OpenAIChat
    from stratamem.providers import from_anthropic, to_openai
    from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply

    msgs = list(transcript(args.agent_turns))
    shapes = {"anthropic": msgs, "openai": to_openai(from_anthropic(msgs))}
    if len(shapes["openai"]) != len(msgs):
        raise SystemExit("the OpenAI rendering of the transcript is not one message per message")
    t0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
    track: dict[tuple[str, int | None, str], Tracker] = {}

    def tracker(arm: str, budget: int | None, fmt: str) -> Tracker:
        return track.setdefault((arm, budget, fmt), Tracker(fmt))

    base = _config(args.set)
    # agentloop_bench.py's settings (keep 8,000 recent tokens, reserve 4,000, checkpoint <= 2,000), the
    # minimum-gain rule as configured (on by default); the threshold is lower than its 32,000 so that a
    # 20-turn transcript compacts a few times (pruning alone keeps it under 32,000).
    ccfg = CompactionConfig(
        **{
            **base.to_dict()["compaction"],
            "threshold": args.agent_threshold,
            "keep_recent_tokens": 8_000,
            "output_reserve": 4_000,
            "checkpoint_max_tokens": 2_000,
        }
    )
    cfg = base.replace(compaction=ccfg)
    embedder = _embedder(args.embed, AGENT_EMBEDDINGS)
    with tempfile.TemporaryDirectory() as tmp, FakeLLMServer(reply=checkpoint_reply) as server:
        mem = Memory(Path(tmp) / "agent.db", namespace="agent", config=cfg, embedder=embedder)
        loops = {}
        layouts: dict[str, tuple[Any, Any]] = {}
        for fmt in args.formats:
            side = Memory(Path(tmp) / f"wrap-{fmt}.db", namespace="agent", config=cfg, embedder=None)
            model = OpenAIChat("fake-summarizer", base_url=server.openai_base_url, max_retries=0)

            def make(fmt: str = fmt, side: Any = side, model: Any = model) -> Any:
                return Compactor(
                    model, provider=fmt, memory=side, session="replay", config=cfg.compaction, pruning=cfg.pruning
                )

            # What stratamem.wrap(client) sends: LoopSession.before on the caller's whole list (the
            # live list pruned and compacted, with the caller's and, when cache-aware, our breakpoints).
            loops[fmt] = (side, LoopSession(make, fmt), [])
            if hasattr(LoopSession, "before_layout"):
                # The same wrapper over a memory with the cache layout on: it sends the caller's system
                # prompt and memory.context(..., cache=True) instead of the live list.
                lcfg = cfg.replace(context=dataclasses.replace(cfg.context, cache_layout=True))
                lside = Memory(Path(tmp) / f"wrap-layout-{fmt}.db", namespace="agent", config=lcfg, embedder=embedder)

                def lmake(fmt: str = fmt, side: Any = lside, model: Any = model) -> Any:
                    return Compactor(
                        model, provider=fmt, memory=side, session="replay", config=cfg.compaction, pruning=cfg.pruning
                    )

                layouts[fmt] = (lside, LoopSession(lmake, fmt, memory=lside, session="replay"))
        query = ""
        newest: set[int] = set()  # turns stored since the previous model call
        stored: list[Any] = []  # and their records
        for i, m in enumerate(msgs):
            if m["role"] == "user" and isinstance(m["content"], str):
                query = m["content"]
            if m["role"] == "assistant":  # the agent calls the model before each assistant message
                for budget in args.budgets:
                    for fmt in args.formats:
                        ctx = mem.context(query, budget=budget, session="agent", format=fmt)
                        tracker("assembly", budget, fmt).call(
                            ser.request(*_request(ctx)), "agent", ctx.manifest, newest, stored
                        )
                newest, stored = set(), []
                for fmt in args.formats:
                    if args.whole:
                        tracker("whole history", None, fmt).call(ser.request(None, shapes[fmt][:i]), "agent")
                    _, loop, _ = loops[fmt]
                    before, asked = loop.compactor.state.compacted_messages, len(server.requests)
                    try:
                        sent = loop.before(shapes[fmt][:i], None, model=WRAP_MODELS[fmt])
                    except TypeError:  # a tree from before the model argument
                        sent = loop.before(shapes[fmt][:i], None)
                    t = tracker("wrap", None, fmt)
                    t.compactions += loop.compactor.state.compacted_messages > before
                    # The checkpoint calls this compaction made: their input is billed too (uncached).
                    for r in server.requests[asked:]:
                        t.summarizer += len(ser.request(None, list(r.body.get("messages") or ())))
                    t.call(ser.request(None, sent), "agent")
                    if fmt in layouts:
                        lloop = layouts[fmt][1]
                        lsent = lloop.before_layout(shapes[fmt][:i], None, model=WRAP_MODELS[fmt])
                        tracker("wrap layout", None, fmt).call(ser.request(lloop.sent_system, lsent), "agent")
            added = mem.add(m, session="agent", format="anthropic", timestamp=t0 + timedelta(seconds=20 * i))
            newest |= {st.id for st in added}
            stored += added
        for side, _, _ in loops.values():
            side.close()
        for lside, _ in layouts.values():
            lside.close()
        mem.close()
    if embedder is not None:
        embedder.save()
    for (arm, budget, fmt), t in track.items():
        rows.append(
            {
                "dataset": "agent",
                "conv": f"transcript-{args.agent_turns}",
                "arm": arm,
                "budget": budget,
                "format": fmt,
                **t.summary(),
            }
        )
    ser.clear()


def main(argv: list[str] | None = None) -> None:
    """Run the replays named on the command line and write the JSON result."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--locomo", type=int, nargs="*", default=[])
    ap.add_argument("--sessions", type=int, default=0, help="first N sessions of each conversation (0: all)")
    ap.add_argument("--agent", action="store_true")
    ap.add_argument("--agent-turns", type=int, default=20)
    ap.add_argument("--agent-threshold", type=int, default=20_000, help="compaction threshold of the wrap arm")
    ap.add_argument("--budgets", type=int, nargs="*", default=[2000, 8000], help="none: no assembly arm")
    ap.add_argument("--formats", nargs="+", default=["openai", "anthropic"])
    ap.add_argument("--whole", action="store_true", help="also the whole-history arm")
    ap.add_argument("--recall", action="store_true", help="b@2048 of each LoCoMo conversation replayed")
    ap.add_argument("--embed", choices=("local", "none"), default="local")
    ap.add_argument(
        "--one-cache",
        action="store_true",
        help="keep provider caches across LoCoMo sessions (an upper bound: real sessions are days apart)",
    )
    ap.add_argument("--set", type=json.loads, default={}, help="config overrides as a JSON object")
    args = ap.parse_args(argv)
    import stratamem
    from stratamem.tokens import get_tokenizer

    ser = Serializer(get_tokenizer("o200k_base"))
    rows: list[dict[str, Any]] = []
    recall: dict[str, Any] = {}
    seconds: dict[str, float] = {}
    for pos in args.locomo:
        t = time.perf_counter()
        replay_locomo(pos, args, ser, rows, recall)
        seconds[f"locomo {pos}"] = time.perf_counter() - t
    if args.agent:
        t = time.perf_counter()
        replay_agent(args, ser, rows)
        seconds["agent"] = time.perf_counter() - t
    args.out.write_text(
        json.dumps(
            {
                "stratamem": str(Path(stratamem.__file__).parent),
                "set": args.set,
                "rows": rows,
                "recall": recall,
                "seconds": seconds,
                "load": os.getloadavg()[0],
            }
        )
    )


if __name__ == "__main__":
    main()
