"""Fit the salience weights of the offline item extractor (issue 25), leave one conversation out.

The offline extractor (``stratamem.items.extract.RuleExtractor``) scores every
statement of a turn (``stratamem.summarize.statements``: a cleaned sentence and
its shallow features) with two logistic regressions whose weights are plain
constants in ``stratamem/summarize/salience.py``: *salience* (does this turn
hold a fact about someone?) and *choice* (is this the sentence that states
it?). This script is where those constants come from, and the only place they
may come from:

* **data** — the 10 LoCoMo conversations; every statement of every turn, with
  the library's own feature function, so the fit sees what the extractor sees;
* **labels** — salience: one of LoCoMo's observations cites the statement's
  turn; choice: it does *and* shares at least two content words with the
  statement (the same test as ``items_quality.py``'s "grounded on topic"): the
  sentence that holds the fact, not the turn's greeting;
* **held out** — every figure printed is leave-one-conversation-out: the
  weights and the threshold that scores conversation *k* are fitted on the
  other nine, the threshold read off the training folds as the score that
  keeps the target share of turns. L2 strength is the one free setting; it is
  chosen by the held-out log-loss over a small grid (never by grounded/covered);
* **final** — fitted once on all ten conversations; ``--write`` puts the
  weights and the thresholds for the target rates into ``salience.py``.

A turn's salience is its best statement's salience; the extractor keeps the
turns at or above the threshold and quotes the statement the choice model
ranks first. Printed, held
out, per target rate: turns kept per 1,000, the share of kept turns an
observation cites (≈ grounded), observations covered (≈ covered), the share
of kept statements on topic, and the per-conversation spread of the rate.

Usage::

    .venv/bin/python benchmarks/items_fit.py [--write] [--rates 150 250]

Takes ~20 s. ``items_quality.py`` then measures the extractor through the
public API; it reports the in-sample weights (fitted on the same ten
conversations), so its figures sit slightly above the held-out ones here.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "src"))

from benchmarks.items_quality import LOCOMO, content_words, observations  # noqa: E402
from stratamem.summarize.facts import explicit  # noqa: E402
from stratamem.summarize.statements import FEATURES, asks, statements  # noqa: E402

SALIENCE_PY = ROOT / "src" / "stratamem" / "summarize" / "salience.py"
L2_GRID = (1e-4, 1e-3, 1e-2, 3e-2, 1e-1)


@dataclass(frozen=True, slots=True)
class Row:
    """One statement of one LoCoMo turn."""

    sample: int
    dia: str
    turn: int
    """Index of the turn in the whole set (statements of one turn share it)."""
    x: np.ndarray
    on_topic: bool
    cited: bool
    explicit: bool
    """A decision, stated preference or constraint: the extractor keeps it whatever its salience."""


def load() -> tuple[list[Row], int, list[list[tuple[str, ...]]], list[int]]:
    """Statements with features and labels; the number of turns; observations per sample; turns per sample."""
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    rows: list[Row] = []
    obs_per: list[list[tuple[str, ...]]] = []
    turns_per: list[int] = []
    n_turn = 0
    for pos, sample in enumerate(data):
        conv = sample["conversation"]
        names = [conv["speaker_a"], conv["speaker_b"]]
        obs = observations(sample)
        obs_per.append([ids for _, _, ids in obs])
        said: dict[str, set[str]] = {}
        for _, fact, ids in obs:
            for d in ids:
                said.setdefault(d, set()).update(content_words(fact, names))
        count = 0
        for key in sorted((k for k in conv if re.fullmatch(r"session_\d+", k)), key=lambda k: int(k.split("_")[1])):
            session = conv[key]
            for i, t in enumerate(session):
                text = t["text"] + (f" [shares {t['blip_caption']}]" if t.get("blip_caption") else "")
                prev = session[i - 1] if i else None
                answers = prev is not None and prev["speaker"] != t["speaker"] and asks(prev["text"])
                for st in statements(text, names, answers=answers, opening=i < 2):
                    words = content_words(st.text, names)
                    rows.append(
                        Row(
                            pos,
                            t["dia_id"],
                            n_turn,
                            np.array([st.features[f] for f in FEATURES]),
                            len(words & said.get(t["dia_id"], set())) >= 2,
                            t["dia_id"] in said,
                            explicit(st.text),
                        )
                    )
                n_turn += 1
                count += 1
        turns_per.append(count)
    return rows, n_turn, obs_per, turns_per


def fit(x: np.ndarray, y: np.ndarray, l2: float, steps: int = 600, lr: float = 0.5) -> tuple[np.ndarray, float]:
    """Logistic regression by gradient descent on standardised features; weights on the raw scale and intercept."""
    mu, sd = x.mean(0), x.std(0) + 1e-9
    z = (x - mu) / sd
    w = np.zeros(z.shape[1])
    b = 0.0
    for _ in range(steps):
        p = 1 / (1 + np.exp(-(z @ w + b)))
        w -= lr * (z.T @ (p - y) / len(y) + l2 * w)
        b -= lr * float(np.mean(p - y))
    raw = w / sd
    return raw, b - float(raw @ mu)


def predict(weights: np.ndarray, bias: float, x: np.ndarray) -> np.ndarray:
    """Probabilities of the rows of ``x``."""
    return 1 / (1 + np.exp(-(x @ weights + bias)))


def matrix(rows: Sequence[Row]) -> np.ndarray:
    """The feature rows."""
    return np.array([r.x for r in rows])


def label(rows: Sequence[Row], name: str) -> np.ndarray:
    """``cited`` (the turn is an observation's source) or ``on_topic`` (and the statement says it) per row."""
    return np.array([getattr(r, name) for r in rows], dtype=float)


def choose(rows: Sequence[Row], turn_p: np.ndarray, pick_p: np.ndarray) -> dict[int, tuple[float, int]]:
    """Per turn: its salience (best statement's ``turn_p``; 1 when a statement is explicit, as the extractor
    keeps those whatever the score) and the statement it quotes (best ``pick_p``, an explicit one first)."""
    sal: dict[int, float] = {}
    best: dict[int, tuple[tuple[bool, float], int]] = {}
    for i, r in enumerate(rows):
        sal[r.turn] = max(sal.get(r.turn, 0.0), 1.0 if r.explicit else float(turn_p[i]))
        rank = (r.explicit, float(pick_p[i]))
        if r.turn not in best or rank > best[r.turn][0]:
            best[r.turn] = (rank, i)
    return {t: (sal[t], best[t][1]) for t in sal}


def threshold(chosen: dict[int, tuple[float, int]], n_turns: int, per1k: float) -> float:
    """The salience that keeps ``per1k`` turns per 1,000 of ``n_turns`` (turns without statements count, unkept)."""
    scores = sorted((p for p, _ in chosen.values()), reverse=True)
    keep = int(round(per1k * n_turns / 1000))
    return scores[min(keep, len(scores)) - 1] if keep else 1.0


def held_out(
    rows: Sequence[Row], turns_per: Sequence[int], l2: dict[str, float], rates: Sequence[float]
) -> tuple[dict[int, tuple[float, int]], dict[float, dict[int, float]]]:
    """Held-out choice of every turn, and per rate the threshold each fold's training turns gave."""
    x = matrix(rows)
    samples = np.array([r.sample for r in rows])
    probs = {name: np.zeros(len(rows)) for name in ("cited", "on_topic")}
    cuts: dict[float, dict[int, float]] = {rate: {} for rate in rates}
    for s in sorted(set(samples.tolist())):
        train = samples != s
        fitted = {name: fit(x[train], label(rows, name)[train], l2[name]) for name in probs}
        for name, (w, b) in fitted.items():
            probs[name][~train] = predict(w, b, x[~train])
        train_rows = [r for r, t in zip(rows, train, strict=True) if t]
        chosen = choose(train_rows, predict(*fitted["cited"], x[train]), predict(*fitted["on_topic"], x[train]))
        n_train = sum(n for k, n in enumerate(turns_per) if k != s)
        for rate in rates:
            cuts[rate][s] = threshold(chosen, n_train, rate)
    return choose(rows, probs["cited"], probs["on_topic"]), cuts


def held_out_loss(rows: Sequence[Row], name: str, l2: float) -> float:
    """Held-out log-loss of one model at one L2 strength (the only thing the L2 choice reads)."""
    x, y = matrix(rows), label(rows, name)
    samples = np.array([r.sample for r in rows])
    prob = np.zeros(len(rows))
    for s in sorted(set(samples.tolist())):
        train = samples != s
        prob[~train] = predict(*fit(x[train], y[train], l2), x[~train])
    p = np.clip(prob, 1e-9, 1 - 1e-9)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def score(
    rows: Sequence[Row],
    chosen: dict[int, tuple[float, int]],
    cut_of: dict[int, float],
    obs_per: Sequence[Sequence[tuple[str, ...]]],
    turns_per: Sequence[int],
) -> dict[str, float]:
    """Kept turns per 1k, grounded, covered, on topic, and the spread of the rate over conversations."""
    kept = [rows[i] for p, i in chosen.values() if p >= cut_of[rows[i].sample]]
    sources = {(r.sample, r.dia) for r in kept}
    n_obs = sum(len(o) for o in obs_per)
    covered = sum(any((pos, d) in sources for d in o) for pos, per in enumerate(obs_per) for o in per)
    per_conv = [1000 * sum(1 for r in kept if r.sample == s) / max(1, turns_per[s]) for s in range(len(turns_per))]
    return {
        "per1k": 1000 * len(kept) / sum(turns_per),
        "grounded": sum(r.cited for r in kept) / max(1, len(kept)),
        "covered": covered / n_obs,
        "on_topic": sum(r.on_topic for r in kept) / max(1, len(kept)),
        "min": min(per_conv),
        "max": max(per_conv),
    }


def _constants(name: str, weights: np.ndarray, bias: float) -> list[str]:
    return [
        f"{name}_WEIGHTS: dict[str, float] = {{",
        *[f'    "{f}": {w:.4f},' for f, w in zip(FEATURES, weights, strict=True)],
        "}",
        f"{name}_BIAS = {bias:.4f}",
    ]


def write_constants(
    fitted: dict[str, tuple[np.ndarray, float]], cuts: dict[float, float], l2: dict[str, float], summary: list[str]
) -> None:
    """Replace the generated block of ``salience.py`` with the fitted constants."""
    text = SALIENCE_PY.read_text(encoding="utf-8")
    start, end = "# --- fitted by benchmarks/items_fit.py", "# --- end of fitted constants"
    lines = [
        start + " (do not edit by hand; run it with --write) ---",
        f"# LoCoMo, 10 conversations; L2 {l2['cited']:g} (salience), {l2['on_topic']:g} (choice).",
        "# Held out (leave one conversation out), per target volume:",
        *[f"#   {line}" for line in summary],
        *_constants("SALIENCE", *fitted["cited"]),
        *_constants("CHOICE", *fitted["on_topic"]),
        "THRESHOLDS: dict[int, float] = {",
        *[f"    {int(rate)}: {cut:.4f}," for rate, cut in sorted(cuts.items())],
        "}",
        end,
    ]
    head, rest = text.split(start, 1)
    tail = rest.split(end, 1)[1]
    SALIENCE_PY.write_text(head + "\n".join(lines) + tail, encoding="utf-8")


def main(argv: Sequence[str] | None = None) -> None:
    """Fit held out, print the table, fit on everything and (``--write``) store the constants."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rates", type=float, nargs="*", default=[100, 150, 200, 250, 300])
    ap.add_argument("--write", action="store_true", help="write the final constants into salience.py")
    args = ap.parse_args(argv)
    rows, n_turns, obs_per, turns_per = load()
    print(
        f"LoCoMo: {n_turns:,} turns, {len(rows):,} statements; {int(label(rows, 'cited').sum()):,} of cited turns, "
        f"{int(label(rows, 'on_topic').sum()):,} on topic\n"
    )
    l2 = {}
    for name in ("cited", "on_topic"):
        losses = {k: held_out_loss(rows, name, k) for k in L2_GRID}
        l2[name] = min(losses, key=lambda k: losses[k])
        print(
            f"L2 of the {name} model by held-out log-loss: "
            + ", ".join(f"{k:g} {v:.4f}" for k, v in losses.items())
            + f" -> {l2[name]:g}"
        )
    chosen, cuts = held_out(rows, turns_per, l2, args.rates)
    print(
        "\n| target per 1k | kept per 1k (held out) | per conversation | grounded | covered | on topic |\n"
        "|---:|---:|---:|---:|---:|---:|"
    )
    summary = []
    for rate in args.rates:
        r = score(rows, chosen, cuts[rate], obs_per, turns_per)
        print(
            f"| {rate:.0f} | {r['per1k']:.0f} | {r['min']:.0f}-{r['max']:.0f} | {r['grounded']:.3f} "
            f"| {r['covered']:.3f} | {r['on_topic']:.3f} |"
        )
        summary.append(
            f"{rate:.0f} per 1k: kept {r['per1k']:.0f}, grounded {r['grounded']:.3f}, covered {r['covered']:.3f}, "
            f"on topic {r['on_topic']:.3f}"
        )
    x = matrix(rows)
    fitted = {name: fit(x, label(rows, name), l2[name]) for name in ("cited", "on_topic")}
    final = choose(rows, predict(*fitted["cited"], x), predict(*fitted["on_topic"], x))
    final_cuts = {rate: threshold(final, n_turns, rate) for rate in args.rates}
    for name, (w, b) in fitted.items():
        print(
            f"\n{name} model (all 10 conversations, raw feature scale): "
            + ", ".join(f"{n} {v:+.3f}" for n, v in zip(FEATURES, w, strict=True))
            + f", bias {b:+.3f}"
        )
    print("thresholds: " + ", ".join(f"{r:.0f}/1k >= {c:.4f}" for r, c in final_cuts.items()))
    if args.write:
        write_constants(fitted, final_cuts, l2, summary)
        print(f"written to {SALIENCE_PY.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
