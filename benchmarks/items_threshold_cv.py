"""Choose ``items.min_salience`` leave one LoCoMo conversation out, from an ``items_quality.py`` sweep (issue 25).

The default salience threshold of the offline extractor is a fitted constant:
it must be chosen on nine conversations and judged on the tenth. Run the
sweep through the real ingest first (one variant per threshold, dumped)::

    V=""; for t in 70 71 72 73 74 75 76 77 78; do V="$V --variant t$t={\\"items\\":{\\"min_salience\\":0.$t}}"; done
    .venv/bin/python benchmarks/items_quality.py --baseline main --parts quality $V --dump /tmp/sweep

then (the dump of tree *k* is ``/tmp/sweep.<k>.quality.json``, in the order the trees print)::

    .venv/bin/python benchmarks/items_threshold_cv.py 0.70=/tmp/sweep.3.quality.json 0.71=/tmp/sweep.4.quality.json ...

For each held-out conversation the threshold is the one that, on the other
nine, covers most observations with at most ``--cap`` items per 1,000 turns
and grounded at least ``--grounded``; the held-out figures add up the
held-out conversations, each scored at its own fold's threshold.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.items_quality import LOCOMO, score_quality  # noqa: E402


def _ok(t: Counter[str], cap: float, grounded: float) -> bool:
    return 1000 * t["items"] / t["turns"] <= cap and t["grounded"] / max(1, t["items"]) >= grounded


def _line(t: Counter[str]) -> str:
    return (
        f"{1000 * t['items'] / t['turns']:.0f} per 1k, grounded {t['grounded'] / t['items']:.3f}, "
        f"covered {t['covered'] / t['obs']:.3f}, source precision {t['sources_cited'] / t['sources']:.3f}"
    )


def main(argv: Sequence[str] | None = None) -> None:
    """Print the per-fold choice and the held-out figures beside each threshold's in-sample ones."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dumps", nargs="+", help="THRESHOLD=PATH of an items_quality.py --dump file")
    ap.add_argument("--cap", type=float, default=150.0)
    ap.add_argument("--grounded", type=float, default=0.85)
    args = ap.parse_args(argv)
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    per: dict[float, dict[int, Counter[str]]] = {}
    for spec in args.dumps:
        tau, path = spec.split("=", 1)
        convs = json.loads(Path(path).read_text(encoding="utf-8"))["conversations"]
        per[float(tau)] = {r["sample"]: Counter(r) for r in score_quality(data, convs)["per"]}
    taus = sorted(per)
    samples = sorted(per[taus[0]])
    held: Counter[str] = Counter()
    picks = []
    for k in samples:
        train = {tau: sum((per[tau][s] for s in samples if s != k), Counter()) for tau in taus}
        fits = [tau for tau in taus if _ok(train[tau], args.cap, args.grounded)]
        if not fits:
            raise SystemExit(f"fold {k}: no threshold meets the cap and the grounded bound on the other conversations")
        best = max(fits, key=lambda tau: (train[tau]["covered"], tau))
        picks.append(best)
        held += per[best][k]
    print(
        "threshold chosen per held-out conversation: "
        + ", ".join(f"{k}: {p:.2f}" for k, p in zip(samples, picks, strict=True))
    )
    print(f"held out: {_line(held)}")
    for tau in taus:
        print(f"all ten at {tau:.2f}: {_line(sum(per[tau].values(), Counter()))}")


if __name__ == "__main__":
    main()
