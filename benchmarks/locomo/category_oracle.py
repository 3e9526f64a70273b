"""Could the embedding model bridge a question's category word to the instance a turn names? (issue 30)

    PYTHONPATH=src .venv/bin/python -m benchmarks.locomo.category_oracle [--samples 0 1]

The engine ranks every LoCoMo multi-hop question (``HybridIndex.search``, default
settings); every gold turn outside the top 10 is a *miss*, and a miss that shares no
analysed term with the question is a *no-shared-word miss* (category against
instance: "activities" / "we went camping"). Each expansion variant maps the
question's content words to terms of the conversation's own vocabulary through
MiniLM vectors of the terms (each distinct stem embedded once, as its most frequent
surface word); the oracle counts the misses whose turn holds at least one
expansion term (the expansion *reaches* it), and the noise: the share of the
conversation's turns that hold one. Variants: the ``top`` terms nearest each question
word (``word``), the phrases "a kind of <word>" (``kind``) and "<word> such as"
(``such``), or the question's own vector (``question``); ``cat`` tags every term
with its nearest of a fixed list of :data:`CATEGORIES` (when that cosine is at least
``top`` / 100) and expands a question word within 0.6 of a category to the terms so
tagged. Scoring side only: nothing here changes a ranking.
"""

from __future__ import annotations

import argparse
import re
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from stratamem.retrieve import HybridIndex, analyze
from stratamem.store import SQLiteStore

from .embedcache import CACHE, CachedEmbedder, cached_embedder
from .protocol import load_conversations

TERM_CACHE = Path("/tmp/stratamem-m31-terms.npz")
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
CATEGORIES = (
    "activity hobby sport game exercise event book movie music instrument song art painting food drink meal "
    "pet animal place city country trip travel job career work school class family child friend item gift "
    "clothing car house plant health illness emotion holiday celebration"
).split()


def surface_forms(texts: list[str]) -> dict[str, str]:
    """Each analysed stem -> its most frequent surface word (what is embedded for it)."""
    counts: dict[str, Counter] = defaultdict(Counter)
    for text in texts:
        for w in _WORD.findall(text.lower().replace("'", "")):
            for t in analyze(w):
                counts[t][w] += 1
    return {t: c.most_common(1)[0][0] for t, c in counts.items()}


def main(argv: list[str] | None = None) -> None:
    """Print, per expansion variant, how many misses it reaches and at what noise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="*")
    ap.add_argument("--tops", type=int, nargs="*", default=[5, 10, 20, 40])
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    embedder = cached_embedder(CACHE)
    assert embedder is not None, "needs the local MiniLM"
    terms_emb = CachedEmbedder(embedder.inner, TERM_CACHE)
    templates = {
        "word": "{}",
        "kind": "a kind of {}",
        "such": "{} such as",
    }
    reached: dict[tuple[str, int], int] = Counter()
    reached_all: dict[tuple[str, int], int] = Counter()
    noise: dict[tuple[str, int], list[float]] = defaultdict(list)
    n_miss = n_noshare = 0
    examples: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "me.db")
        convs = load_conversations(store, samples=args.samples)
        for conv in convs:
            index = HybridIndex(embedder=embedder)
            index.add_turns(conv.turns)
            turns = list(index.turns)
            pos = {st.id: i for i, st in enumerate(turns)}
            turn_terms = [set(analyze(st.text)) for st in turns]
            forms = surface_forms([st.text for st in turns])
            vocab = sorted(forms)
            V = terms_emb.embed_batch([forms[t] for t in vocab])
            V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-9)
            C = terms_emb.embed_batch(list(CATEGORIES))
            C = C / np.linalg.norm(C, axis=1, keepdims=True)
            csims = V @ C.T  # (vocab, categories)
            best = csims.argmax(axis=1)
            names = {t for st in turns if st.turn.name for t in analyze(st.turn.name)}
            holds: dict[str, np.ndarray] = {}
            for i, tt in enumerate(turn_terms):
                for t in tt:
                    holds.setdefault(t, []).append(i)  # type: ignore[arg-type]
            for q in conv.questions:
                if q.category != 1:
                    continue
                hits = index.search(q.text, k=10)
                top = {pos[h.turn_ids[0]] for h in hits}
                gold = {pos[t] for t, d in conv.dia_of.items() if d in q.gold}
                qterms = [t for t in dict.fromkeys(analyze(q.text)) if t not in names]
                missed = [g for g in gold if g not in top]
                noshare = [g for g in missed if not (turn_terms[g] & set(qterms))]
                n_miss += len(missed)
                n_noshare += len(noshare)
                if not qterms:
                    continue
                qsurf = [forms.get(t, t) for t in qterms]
                qwords = [w for w in _WORD.findall(q.text.lower()) if analyze(w) and analyze(w)[0] in qterms]
                variants: dict[str, np.ndarray] = {}
                for name, tpl in templates.items():
                    Q = terms_emb.embed_batch([tpl.format(w) for w in (qwords or qsurf)])
                    variants[name] = Q / np.linalg.norm(Q, axis=1, keepdims=True)
                qv = embedder.embed_batch([index.vector_text(q.text)])
                variants["question"] = qv / np.linalg.norm(qv, axis=1, keepdims=True)
                # fixed categories: a question word near a category (cos >= 0.6) expands to the
                # vocabulary terms whose nearest category it is (cos >= tau/100 for "top" tau)
                Qw = variants["word"] @ C.T
                for tau in args.tops:
                    cats = {int(c) for r in Qw for c in np.flatnonzero(r >= 0.6)}
                    exp = {
                        vocab[j] for j in range(len(vocab)) if int(best[j]) in cats and csims[j, best[j]] >= tau / 100
                    }
                    exp -= set(qterms)
                    got = [g for g in noshare if turn_terms[g] & exp]
                    reached[("cat", tau)] += len(got)
                    reached_all[("cat", tau)] += len([g for g in missed if turn_terms[g] & exp])
                    covered = {i for t in exp for i in holds.get(t, ())}
                    noise[("cat", tau)].append(len(covered) / len(turns))
                for name, Q in variants.items():
                    sims = Q @ V.T  # (words, vocab)
                    for top_n in args.tops:
                        exp: set[str] = set()
                        for row in sims:
                            exp.update(vocab[j] for j in np.argsort(-row)[:top_n])
                        exp -= set(qterms)
                        got = [g for g in noshare if turn_terms[g] & exp]
                        reached[(name, top_n)] += len(got)
                        reached_all[(name, top_n)] += len([g for g in missed if turn_terms[g] & exp])
                        covered = {i for t in exp for i in holds.get(t, ())}
                        noise[(name, top_n)].append(len(covered) / len(turns))
                        if name == "word" and top_n == 10 and len(examples) < 40:
                            examples.append(f"{q.text} -> {sorted(exp)[:60]} reached {len(got)}/{len(noshare)}")
        store.close()
    terms_emb.save()
    embedder.save()
    print(f"multi-hop misses (gold outside top 10): {n_miss}; sharing no term with the question: {n_noshare}")
    print(f"{'variant':<10}{'top':>5}{'reach no-share':>16}{'reach any miss':>16}{'turns touched':>15}")
    for (name, top_n), v in sorted(reached_all.items()):
        print(
            f"{name:<10}{top_n:>5}{reached[(name, top_n)]:>10} ({reached[(name, top_n)] / max(n_noshare, 1):.2f})"
            f"{v:>10} ({v / max(n_miss, 1):.2f}){np.mean(noise[(name, top_n)]):>15.3f}"
        )
    print("\n".join(examples))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
