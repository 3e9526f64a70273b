"""WordNet category expansion scored on both sets beside main (issue 30, fifth round).

    STRATAMEM_WORDNET_DIR=.../wordnet-3.0 PYTHONPATH=src .venv/bin/python -m benchmarks.locomo.wordnet_expand \\
        --settings wn-down:2:2:0.3 wn-up:1:2:0.3:df ...

The harness of :mod:`benchmarks.locomo.category_expand` (every question through
``HybridIndex.search`` with plans; BM25, RRF and main in the same run; the joint
leave-one-conversation-out row), with WordNet settings beside its MiniLM ones:

* ``wn-down:S:D:W[:F]`` — each content word of the question (and each pair of
  adjacent words, for compounds such as "martial arts"), looked up as a noun: the
  single-word lemmas of the hyponyms of its first ``S`` senses within ``D`` is-a
  steps that occur in the conversation are weak BM25 terms, fused at weight ``W``
  into turns that already score (as ``word:N:W``);
* ``wn-up:S:D:W[:F]`` — the reverse, as a write-time field of categories would
  rank: the conversation's terms whose noun ancestors (first ``S`` senses, ``D``
  steps) include a question term are the expansion terms;
* ``F`` filters: ``df`` keeps only terms held by at most 2% of the conversation's
  turns, ``pl`` expands plural question words only ("activities", "books"),
  ``plan`` expands only questions the engine plans (``aggregate``, ``between``, ...);
  ``all`` lets the expansion lift turns the question does not match at all (by
  default it only re-orders turns that already score); ``gold`` keeps only the
  expansion terms that a gold turn holds and ``goldall`` takes every term of the
  gold turns the question lacks (oracle bounds, not rankers); ``mini`` adds the
  MiniLM ``word:3`` terms (a union of the two bridges); they combine with ``+``.

WordNet's files are read at run time from ``STRATAMEM_WORDNET_DIR``; they are not
in the repository.
"""

from __future__ import annotations

import argparse
from typing import Any

from stratamem.retrieve import HybridIndex, analyze
from stratamem.retrieve.query import _CURRENT_RE

from . import category_expand as ce
from .category_oracle import _WORD
from .wordnet import NounNet
from .wordnet_oracle import MAX_DF, lemma_stems, plural

NET: NounNet | None = None


def _net() -> NounNet:
    global NET
    if NET is None:
        NET = NounNet()
    return NET


class WordNetExpander(ce.Expander):
    """The MiniLM expander plus the WordNet variants."""

    def __init__(self, index: HybridIndex, terms_emb: Any, embedder: Any) -> None:
        super().__init__(index, terms_emb, embedder)
        self.held: dict[str, int] = {}
        for st in index.turns:
            for t in set(analyze(st.text)):
                self.held[t] = self.held.get(t, 0) + 1
        self.n_turns = len(index.turns)
        self.cats: dict[tuple[int, int], dict[str, set[str]]] = {}

    def _categories(self, senses: int, depth: int) -> dict[str, set[str]]:
        """Question term -> the vocabulary terms it is an ancestor of (the ``up`` field, inverted)."""
        key = (senses, depth)
        if key not in self.cats:
            net, inv = _net(), {}
            for t in self.vocab:
                if t in self.names:
                    continue
                for c in lemma_stems(net, net.closure(net.lemma_senses(self.forms[t], senses), depth, down=False)):
                    if c != t:
                        inv.setdefault(c, set()).add(t)
            self.cats[key] = inv
        return self.cats[key]

    def expand(self, query: str) -> dict[str, float]:
        """Expansion terms of ``query`` -> weight, at the current setting."""
        variant = ce.SETTING["variant"]
        if not variant.startswith("wn-"):
            return super().expand(query)
        key = (query, variant, ce.SETTING["senses"], ce.SETTING["depth"], ce.SETTING["filter"])
        if "gold" in ce.SETTING["filter"]:
            key += (frozenset(ce.SETTING["gold"]),)
        if key in self.memo:
            return self.memo[key]
        flt = ce.SETTING["filter"]
        if "plan" in flt and not self.index.plan(query).multi:
            self.memo[key] = {}
            return {}
        text = _CURRENT_RE.sub(" ", self.index.query_facts(query).without_relative_words(query))
        words = _WORD.findall(text.lower().replace("'", ""))
        qterms = {t for w in words for t in analyze(w)}
        content = [w for w in words if (a := analyze(w)) and a[0] not in self.names]
        if "pl" in flt:
            content = [w for w in content if plural(w)]
        exp: set[str] = set()
        net, s, d = _net(), ce.SETTING["senses"], ce.SETTING["depth"]
        if variant == "wn-down":
            pairs = [f"{a}_{b}" for a, b in zip(words, words[1:], strict=False) if b in content]
            for w in [*content, *pairs]:
                exp |= lemma_stems(net, net.closure(net.lemma_senses(w, s), d))
            exp &= set(self.vocab)
        else:
            inv = self._categories(s, d)
            for w in content:
                exp |= inv.get(analyze(w)[0], set())
        exp -= qterms | self.names
        if "df" in flt:
            exp = {t for t in exp if self.held.get(t, 0) <= MAX_DF * self.n_turns}
        if "gold" in flt:
            # oracle bounds: only the expansion terms a gold turn holds (``gold``), or every
            # term of the gold turns the question lacks (``goldall``: a perfect bridge)
            held = {t for st in self.index.turns if st.id in ce.SETTING["gold"] for t in analyze(st.text)}
            held -= qterms | self.names
            exp = held if "goldall" in flt else exp & held
        out = dict.fromkeys(sorted(exp), 1.0)
        if "mini" in flt:
            # union with the MiniLM bridge of category_expand (``word:3``), at its cosine weights
            ce.SETTING.update(variant="word", top=3)
            try:
                for t, c in super().expand(query).items():
                    out[t] = max(out.get(t, 0.0), c)
            finally:
                ce.SETTING.update(variant=variant, top=0)
        self.memo[key] = out
        return out


def parse(spec: str) -> dict[str, Any]:
    """``category_expand``'s settings plus ``wn-down`` / ``wn-up``."""
    kind, *rest = spec.split(":")
    if kind in ("wn-down", "wn-up"):
        return {
            "variant": kind,
            "not_current": False,
            "senses": int(rest[0]),
            "depth": int(rest[1]),
            "expand": float(rest[2]),
            "filter": rest[3] if len(rest) > 3 else "",
            "top": 0,
        }
    return _parse(spec)


_parse = ce._parse


_fused = ce.fused


def fused(sig: Any, weights: Any, substance: Any) -> Any:
    """``category_expand.fused``; under the ``all`` filter the expansion also reaches unmatched turns."""
    if "all" not in ce.SETTING.get("filter", "") or "expand" not in sig or sig["expand"].max() <= 0:
        return _fused(sig, weights, substance)
    w = ce.SETTING["expand"]
    f, parts, prior = _fused({k: v for k, v in sig.items() if k != "expand"}, weights, substance)
    part = w * sig["expand"] / sig["expand"].max()
    parts["expand"] = part
    return f + part, parts, prior


def main(argv: list[str] | None = None) -> None:
    """Run ``category_expand`` with the WordNet expander and settings."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", nargs="*", default=["wn-down:2:2:0.3", "wn-up:1:2:0.3"])
    args = ap.parse_args(argv)
    _net()
    expander, ce.Expander, ce._parse, ce.fused = ce.Expander, WordNetExpander, parse, fused  # type: ignore[misc]
    try:
        ce.main(["--settings", *args.settings])
    finally:
        ce.Expander, ce._parse, ce.fused = expander, _parse, _fused  # type: ignore[misc]


if __name__ == "__main__":
    main()
