"""Could WordNet's is-a links bridge a question's category word to the instance a turn names? (issue 30)

    STRATAMEM_WORDNET_DIR=.../wordnet-3.0 PYTHONPATH=src .venv/bin/python -m benchmarks.locomo.wordnet_oracle

The same misses as :mod:`benchmarks.locomo.category_oracle` (every LoCoMo multi-hop
gold turn outside the engine's top 10, and those sharing no analysed term with the
question), reached through WordNet instead of MiniLM:

* ``down:S:D`` — each content word of the question (speaker names and time cues left
  out) is looked up as a noun; the hyponyms of its first ``S`` senses within ``D``
  is-a steps (instance hyponyms included) give single-word lemmas, analysed to
  stems and intersected with the conversation's vocabulary: the expansion terms.
* ``up:S:D`` — the reverse, as a write-time field would do it: every vocabulary
  term (as its most frequent surface word) is looked up as a noun and its
  hypernym ancestors within ``D`` steps (first ``S`` senses) are its *categories*;
  a turn is reached when a question term is a category of one of its terms.

Reach (of the no-shared-word misses and of all misses) and noise (the share of
the conversation's turns that hold an expansion term / a matching category) are
printed as in ``category_oracle``; ``lift`` = reach share / noise (a random term
set touching that share of turns would reach as many: lift 1).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from stratamem.retrieve import HybridIndex, analyze
from stratamem.retrieve.query import _CURRENT_RE
from stratamem.store import SQLiteStore

from .category_oracle import _WORD, surface_forms
from .embedcache import CACHE, cached_embedder
from .protocol import load_conversations
from .wordnet import NounNet

SENSES = (1, 2, 99)
DEPTHS = (1, 2, 3, 6)
FILTERS = ("", "pl", "df", "pl+df")
MAX_DF = 0.02


def lemma_stems(net: NounNet, synsets: dict[int, int]) -> set[str]:
    """Analysed stems of the single-word lemmas of ``synsets``."""
    out: set[str] = set()
    for s in synsets:
        for w in net.words[s]:
            if "_" not in w and "-" not in w:
                out.update(analyze(w))
    return out


def plural(word: str) -> bool:
    """A plural noun form ("activities", "children"): a list of instances is asked for."""
    return word in ("children", "people") or (word.endswith("s") and not word.endswith("ss") and len(word) > 3)


def question_words(index: HybridIndex, text: str, names: set[str]) -> list[tuple[str, str]]:
    """(surface word, stem) of the question's content words: names and time cues left out."""
    text = _CURRENT_RE.sub(" ", index.query_facts(text).without_relative_words(text))
    out: dict[str, str] = {}
    for w in _WORD.findall(text.lower().replace("'", "")):
        a = analyze(w)
        if a and a[0] not in names:
            out.setdefault(a[0], w)
    return [(w, t) for t, w in out.items()]


def main(argv: list[str] | None = None) -> None:
    """Print, per WordNet variant, how many misses it reaches and at what noise."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--samples", type=int, nargs="*")
    ap.add_argument("--examples", type=int, default=30)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    net = NounNet()
    embedder = cached_embedder(CACHE)
    assert embedder is not None, "needs the local MiniLM"
    reached: Counter = Counter()
    reached_all: Counter = Counter()
    noise: dict[tuple, list[float]] = defaultdict(list)
    n_miss = n_noshare = 0
    examples: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        store = SQLiteStore(Path(tmp) / "me.db")
        for conv in load_conversations(store, samples=args.samples):
            index = HybridIndex(embedder=embedder)
            index.add_turns(conv.turns)
            turns = list(index.turns)
            pos = {st.id: i for i, st in enumerate(turns)}
            turn_terms = [set(analyze(st.text)) for st in turns]
            forms = surface_forms([st.text for st in turns])
            vocab = set(forms)
            names = {t for n in index._corpus.speakers for t in analyze(n)}
            holds: dict[str, list[int]] = defaultdict(list)
            for i, tt in enumerate(turn_terms):
                for t in tt:
                    holds[t].append(i)
            # up: each vocabulary term's categories (ancestor stems), per (senses, depth)
            cats: dict[tuple[int, int], dict[str, set[str]]] = {}
            for s in SENSES:
                for d in DEPTHS:
                    cats[(s, d)] = {
                        t: lemma_stems(net, net.closure(net.lemma_senses(forms[t], s), d, down=False)) - {t}
                        for t in vocab
                        if t not in names
                    }
            for q in conv.questions:
                if q.category != 1:
                    continue
                top = {pos[h.turn_ids[0]] for h in index.search(q.text, k=10)}
                gold = {pos[t] for t, d in conv.dia_of.items() if d in q.gold}
                qw = question_words(index, q.text, names)
                qterms = {t for _, t in qw}
                missed = [g for g in gold if g not in top]
                noshare = [g for g in missed if not (turn_terms[g] & qterms)]
                n_miss += len(missed)
                n_noshare += len(noshare)
                for s in SENSES:
                    for d in DEPTHS:
                        for flt in FILTERS:
                            # pl: only plural question words (a list of instances); df: only
                            # expansion terms held by at most MAX_DF of the conversation's turns
                            words = [w for w, t in qw if "pl" not in flt or plural(w)]
                            exp: set[str] = set()
                            for w in words:
                                exp |= lemma_stems(net, net.closure(net.lemma_senses(w, s), d))
                            exp = (exp & vocab) - qterms - names
                            if "df" in flt:
                                exp = {t for t in exp if len(holds[t]) <= MAX_DF * len(turns)}
                            key = ("down" + (f"-{flt}" if flt else ""), s, d)
                            got = [g for g in noshare if turn_terms[g] & exp]
                            reached[key] += len(got)
                            reached_all[key] += len([g for g in missed if turn_terms[g] & exp])
                            covered = {i for t in exp for i in holds[t]}
                            noise[key].append(len(covered) / len(turns))
                            if flt == "pl+df" and s == 2 and d == 3 and len(examples) < args.examples and noshare:
                                examples.append(
                                    f"{q.text} -> {sorted(exp)[:40]} reached {len(got)}/{len(noshare)}: "
                                    + " | ".join(turns[g].text[:70] for g in noshare[:3])
                                )
                            table = cats[(s, d)]
                            qt = {t for w, t in qw if "pl" not in flt or plural(w)}

                            def up_hit(i: int, table: dict = table, qt: set = qt, flt: str = flt) -> bool:
                                return any(
                                    qt & table.get(t, set())
                                    for t in turn_terms[i] - qterms
                                    if "df" not in flt or len(holds[t]) <= MAX_DF * len(turns)
                                )

                            key = ("up" + (f"-{flt}" if flt else ""), s, d)
                            reached[key] += sum(1 for g in noshare if up_hit(g))
                            reached_all[key] += sum(1 for g in missed if up_hit(g))
                            noise[key].append(sum(1 for i in range(len(turns)) if up_hit(i)) / len(turns))
        store.close()
    embedder.save()
    print(f"multi-hop misses (gold outside top 10): {n_miss}; sharing no term with the question: {n_noshare}")
    print(f"{'variant':<16}{'reach no-share':>18}{'reach any miss':>18}{'turns touched':>15}{'lift':>7}")
    for key in sorted(reached_all, key=lambda k: (k[0], k[1], k[2])):
        r, ra, nz = reached[key], reached_all[key], float(np.mean(noise[key]))
        share = r / max(n_noshare, 1)
        print(
            f"{key[0] + ':' + str(key[1]) + ':' + str(key[2]):<16}{r:>8} ({share:.2f}){ra:>11} ({ra / max(n_miss, 1):.2f})"
            f"{nz:>15.3f}{share / nz if nz else 0:>7.1f}"
        )
    print("\n".join(examples))
    print(f"total {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
