"""Prototype re-rankers for LoCoMo multi-hop misses, measured on both sets beside main (issue 30).

    PYTHONPATH=src .venv/bin/python -m benchmarks.locomo.category_expand [--settings word:3:0.3 ...]

Every setting ranks every question of LoCoMo and of the chat set (v1) through
``HybridIndex.search`` (plans included), with one change:

* ``word:N:W`` — **category bridge**: each content word of the question (speaker
  names and time cues such as "right now", "two weeks ago" left out) is expanded
  with the ``N`` terms of the conversation's own vocabulary whose MiniLM vector is
  nearest the word's (each stem embedded once, as its most frequent surface word),
  weighted by their cosine; BM25 of the turn over those terms, scaled to [0, 1],
  is fused at weight ``W`` into turns that already score. ``question:N:W`` takes
  the terms nearest the question's vector instead; ``word-nc`` skips questions
  about the present;
* ``cat:P:W`` — write-time tags instead: every vocabulary term is tagged with its
  nearest word of a fixed list of categories (kept when that cosine is at least
  ``P`` / 100); a question word within 0.6 of a category expands to the terms
  tagged with it;
* ``cap:M:R`` — a neighbourhood cap: a turn with ``M`` turns already placed
  within ``R`` of it in its session waits behind the top 10;
* ``asks:W`` — a turn's fused score shrinks by ``W`` × the share of its
  sentences that are questions;
* ``gspk:F`` — an ``aggregate`` question gathers from the named speakers' turns
  only, down to ``F`` × the plan's floor.

``main`` (no change), BM25 turns and BM25+MiniLM RRF are scored in the same run.
Prints r@10 / all@10 per category/type and a joint leave-one-conversation-out
row: each fold holds out conversation *i* of both sets and picks the setting
(main or a prototype) with the best mean of the two sets' r@10 on the other 9 + 9.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np

import stratamem.retrieve.engine as engine_mod
from stratamem.retrieve import HybridIndex, analyze
from stratamem.retrieve.query import _CURRENT_RE
from stratamem.retrieve.weights import fuse_signals as _fuse
from stratamem.store import SQLiteStore

from .baselines import BM25Turns, DenseTurns, RRFTurns
from .category_oracle import _WORD, CATEGORIES, TERM_CACHE, surface_forms
from .embedcache import CACHE, SYNTH_CACHE, CachedEmbedder, cached_embedder
from .metrics import category_label

SETTING: dict[str, Any] = {}
"""The setting being scored (read by the patched fusion and signals)."""

_SENT = re.compile(r"[^.!?]+[.!?]*")


def fused(sig: Any, weights: Any, substance: Any) -> Any:
    """``fuse_signals`` plus the prototype signals at the current setting."""
    f, parts, prior = _fuse({k: v for k, v in sig.items() if k not in ("expand", "asks")}, weights, substance)
    if SETTING.get("asks", 0) > 0 and "asks" in sig:
        part = -SETTING["asks"] * sig["asks"] * np.clip(f, 0, None)
        parts["asks"], f = part, f + part
    w = SETTING.get("expand", 0.0)
    if w > 0 and "expand" in sig and sig["expand"].max() > 0:
        # only re-orders turns the question already matches (like the substance prior)
        part = np.where(f > 0, w * sig["expand"] / sig["expand"].max(), 0.0)
        parts["expand"], f = part, f + part
    return f, parts, prior


class Expander:
    """One conversation's term vectors and the expansion of a query."""

    def __init__(self, index: HybridIndex, terms_emb: CachedEmbedder, embedder: Any) -> None:
        self.index = index
        self.forms = surface_forms([st.text for st in index.turns])
        self.vocab = sorted(self.forms)
        V = terms_emb.embed_batch([self.forms[t] for t in self.vocab])
        self.V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-9)
        self.names = {t for name in index._corpus.speakers for t in analyze(name)}
        self.terms_emb, self.embedder = terms_emb, embedder
        self.memo: dict[tuple, dict[str, float]] = {}
        C = terms_emb.embed_batch(list(CATEGORIES))
        self.C = C / np.linalg.norm(C, axis=1, keepdims=True)
        csims = self.V @ self.C.T
        # write-time tags: each term's nearest category of the fixed list, and how near
        self.tag, self.tag_cos = csims.argmax(axis=1), csims.max(axis=1)

    def expand(self, query: str) -> dict[str, float]:
        """Expansion terms of ``query`` -> cosine, at the current setting."""
        key = (query, SETTING["variant"], SETTING["top"])
        if key in self.memo:
            return self.memo[key]
        # time cues ("right now", "two weeks ago") are not topics: their words are not expanded
        query = _CURRENT_RE.sub(" ", self.index.query_facts(query).without_relative_words(query))
        qterms = [t for t in dict.fromkeys(analyze(query)) if t not in self.names]
        out: dict[str, float] = {}
        if qterms:
            if SETTING["variant"] == "question":
                Q = self.embedder.embed_batch([self.index.vector_text(query)])
            else:
                words = [
                    w for w in _WORD.findall(query.lower().replace("'", "")) if (a := analyze(w)) and a[0] in qterms
                ]
                Q = self.terms_emb.embed_batch(words or [self.forms.get(t, t) for t in qterms])
            Q = Q / np.linalg.norm(Q, axis=1, keepdims=True)
            if SETTING["variant"] == "cat":
                # a question word within 0.6 of a category expands to the terms tagged with it
                cats = {int(c) for r in Q @ self.C.T for c in np.flatnonzero(r >= 0.6)}
                floor = SETTING["top"] / 100
                for j in np.flatnonzero(np.isin(self.tag, list(cats)) & (self.tag_cos >= floor)):
                    if self.vocab[j] not in qterms and self.vocab[j] not in self.names:
                        out[self.vocab[j]] = float(self.tag_cos[j])
                self.memo[key] = out
                return out
            for row in Q @ self.V.T:
                for j in np.argsort(-row)[: SETTING["top"]]:
                    t = self.vocab[j]
                    if t not in qterms and t not in self.names:
                        out[t] = max(out.get(t, 0.0), float(row[j]))
        self.memo[key] = out
        return out


def _asking(text: str) -> float:
    """Share of the turn's sentences that are questions (a LoCoMo photo caption is not a sentence)."""
    sents = [x for x in _SENT.findall(text.split("[shares", 1)[0]) if x.strip()]
    return sum(x.rstrip().endswith("?") for x in sents) / len(sents) if sents else 0.0


def patch(index: HybridIndex, ex: Expander) -> None:
    """Add the prototype signals to the index's per-query signals."""
    inner = index._signals
    asks = np.array([_asking(st.text) for st in index.turns])

    def signals(query: str, *args: Any, **kw: Any) -> Any:
        sig, facts = inner(query, *args, **kw)
        if SETTING.get("asks", 0) > 0:
            sig["asks"] = asks
        on = SETTING.get("expand", 0) > 0 and not (SETTING.get("not_current") and facts.current)
        if on and (exp := ex.expand(query)):
            sig["expand"] = index._corpus.bm25.scores(list(exp), exp)
        return sig, facts

    index._signals = signals  # type: ignore[method-assign]


def capped(ranked: list[int], place: dict, most: int, reach: int) -> list[int]:
    """``ranked`` with every turn that has ``most`` placed turns within ``reach`` of it in its session
    moved behind the first 10 places."""
    out: list[int] = []
    later: list[int] = []
    for t in ranked:
        s, i = place[t]
        near = sum(1 for u in out if place[u][0] == s and abs(place[u][1] - i) <= reach)
        (later if near >= most and len(out) < 10 else out).append(t)
    return out + later


_gather = engine_mod.gather


def gather_named(order: np.ndarray, fused: Any, session: np.ndarray, settings: Any) -> Any:
    """``plan.gather`` drawing its gathered turns from the named speakers' turns only (``gspk``)."""
    mask = SETTING.get("named_mask")
    if not SETTING.get("gspk") or mask is None or not mask.any():
        return _gather(order, fused, session, settings)
    keep, head = min(settings.keep, settings.head), settings.head
    top = float(fused[order[0]])
    first = [int(i) for i in order[:keep]]
    taken: dict[int, int] = {}
    for i in first:
        taken[int(session[i])] = taken.get(int(session[i]), 0) + 1
    picked: list[int] = []
    for i in order[keep:]:
        if len(picked) >= head - keep or fused[i] < SETTING["gspk"] * settings.floor * top:
            break
        s = int(session[i])
        if mask[i] and taken.get(s, 0) < settings.per_session:
            taken[s] = taken.get(s, 0) + 1
            picked.append(int(i))
    chosen = set(picked)
    rest = [int(i) for i in order[keep:] if int(i) not in chosen]
    return np.asarray(first + picked + rest, dtype=np.int64), frozenset(picked)


def _parse(spec: str) -> dict[str, Any]:
    kind, *rest = spec.split(":")
    if kind == "gspk":
        return {"gspk": float(rest[0])}
    if kind in ("word", "word-nc", "question", "cat"):
        return {
            "variant": kind.removesuffix("-nc"),
            "not_current": kind.endswith("-nc"),
            "top": int(rest[0]),
            "expand": float(rest[1]),
        }
    if kind == "cap":
        return {"cap": (int(rest[0]), int(rest[1]))}
    if kind == "asks":
        return {"asks": float(rest[0])}
    raise SystemExit(f"unknown setting {spec!r}")


def score_set(dataset: str, specs: list[str], store: Any) -> dict[str, dict[str, dict[str, list]]]:
    """``{setting: {conversation: {category: [(r@10, all@10), ...]}}}`` for one set."""
    if dataset == "locomo":
        from .protocol import load_conversations

        convs = load_conversations(store)
        embedder = cached_embedder(CACHE)
    else:
        from benchmarks.data.make_recall_chats import load_or_generate

        from .synth import load_synth

        convs = load_synth(store, load_or_generate(intervals=False), None)
        embedder = cached_embedder(SYNTH_CACHE)
    assert embedder is not None, "needs the local MiniLM"
    terms_emb = CachedEmbedder(embedder.inner, TERM_CACHE)
    bm25 = BM25Turns()
    dense = DenseTurns(embedder.embed_batch, speaker_prefix=True)
    rrf = RRFTurns(bm25, dense)
    names = ["BM25 turns", "BM25+MiniLM RRF", "main", *specs]
    res: dict[str, dict[str, dict[str, list]]] = {n: defaultdict(lambda: defaultdict(list)) for n in names}
    for conv in convs:
        for system in (bm25, dense, rrf):
            system.fit(conv, store)
        index = HybridIndex(embedder=embedder)
        index.add_turns(conv.turns)
        ex = Expander(index, terms_emb, embedder)
        patch(index, ex)
        place = {st.id: (st.session, i) for i, st in enumerate(index.turns)}
        for q in conv.questions:
            gold = {t for t, d in conv.dia_of.items() if d in q.gold}
            cat = category_label(q.category)
            extra = {"now": q.question_date} if q.question_date is not None else {}
            for name in names:
                SETTING.clear()
                if name == "BM25 turns":
                    top = [st.id for st in bm25.rank(q.text, 10)]
                elif name == "BM25+MiniLM RRF":
                    top = [st.id for st in rrf.rank(q.text, 10)]
                else:
                    SETTING.update(_parse(name) if name != "main" else {})
                    SETTING["gold"] = gold  # read only by the oracle settings of wordnet_expand
                    if "gspk" in SETTING:
                        codes = [index._corpus.speakers[n] for n in index.query_facts(q.text).speakers]
                        SETTING["named_mask"] = np.isin(index._corpus.speaker_of, codes) if codes else None
                    if "cap" in SETTING:
                        ranked = [h.turn_ids[0] for h in index.search(q.text, k=60, **extra)]
                        top = capped(ranked, place, *SETTING["cap"])[:10]
                    else:
                        top = [h.turn_ids[0] for h in index.search(q.text, k=10, **extra)]
                hit = gold & set(top)
                res[name][conv.sample][cat].append((len(hit) / len(gold), float(hit == gold)))
    terms_emb.save()
    embedder.save()
    return res


def _mean(rows: list) -> tuple[float, float]:
    return (float(np.mean([r[0] for r in rows])), float(np.mean([r[1] for r in rows]))) if rows else (0.0, 0.0)


def _flat(per_conv: dict[str, dict[str, list]], convs: list[str] | None = None) -> dict[str, list]:
    out: dict[str, list] = defaultdict(list)
    for c, cats in per_conv.items():
        if convs is None or c in convs:
            for cat, rows in cats.items():
                out[cat] += rows
                out["all"] += rows
    return out


def main(argv: list[str] | None = None) -> None:
    """Score every setting on both sets beside main, BM25 and RRF; then the joint CV row."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="*", default=["word:3:0.3", "word:10:0.3", "question:10:0.3"])
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = {}
    # the engine fuses through this module's `fused` for the run only (importing the module changes nothing)
    engine_mod.fuse_signals = fused  # type: ignore[assignment]
    engine_mod.gather = gather_named  # type: ignore[assignment]
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for dataset in ("locomo", "synth"):
                store = SQLiteStore(Path(tmp) / f"{dataset}.db")
                results[dataset] = score_set(dataset, args.settings, store)
                store.close()
    finally:
        engine_mod.fuse_signals = _fuse  # type: ignore[assignment]
        engine_mod.gather = _gather  # type: ignore[assignment]
    candidates = ["main", *args.settings]
    cv: dict[str, dict[str, dict[str, list]]] = {d: defaultdict(lambda: defaultdict(list)) for d in results}
    convs = {d: sorted(results[d]["main"]) for d in results}
    chosen = []
    for i in range(max(len(c) for c in convs.values())):
        held = {d: convs[d][i] for d in results if i < len(convs[d])}

        def objective(name: str, held: dict = held) -> float:
            return sum(
                _mean(_flat(results[d][name], [c for c in convs[d] if c != held.get(d)])["all"])[0] for d in results
            )

        best = max(candidates, key=objective)
        chosen.append(best)
        for d, c in held.items():
            for cat, rows in results[d][best][c].items():
                cv[d][c][cat] += rows
    for dataset, res in results.items():
        cats = sorted(_flat(res["main"]))
        print(f"\n{dataset} (r@10/all@10)\n{'system':<22}" + "".join(f"{c[:14]:>16}" for c in cats))
        for name, per in [*res.items(), ("joint CV (held out)", cv[dataset])]:
            flat = _flat(per)
            print(f"{name:<22}" + "".join(f"{_mean(flat[c])[0]:>9.3f}/{_mean(flat[c])[1]:.3f}" for c in cats))
    print(f"\nCV folds chose: {chosen}\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
