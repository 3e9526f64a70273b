"""Prompt caching (issue 26): how much of each prompt is the previous call's prefix, and the bill.

Replays LoCoMo conversations and the agent-loop transcript call by call and
serializes every prompt the way it would be sent (``benchmarks/cache/request.py``
defines the serialization once: system, then the messages in order, each piece
encoded with the project's ``o200k_base`` tokenizer). Per conversation it reports

* the **prefix share**: tokens equal to the previous call's longest common
  token prefix, over all prompt tokens (and the median per call);
* the **bill** at published list prices (``benchmarks/cache/billing.py``: the price
  table with its date and sources): OpenAI automatic prefix caching (gpt-4.1,
  cached input 0.25x; gpt-5, 0.1x) and Anthropic ``cache_control`` (Claude
  Sonnet 4.6: writes 1.25x, reads 0.1x, 1,024-token minimum; Haiku 4.5 has a
  4,096-token minimum), both as sent and with the breakpoints a caller would add
  (end of system + last block) when the library sends none; in the ``wrap`` arm
  the checkpoint calls of its compactions are billed too (their input, uncached,
  at the agent model's price);
* where the first changed token falls (which section of the prompt);
* recall b@2048 (LoCoMo protocol, ``Memory.context(question, budget=2048,
  format="text", policy="hybrid")``, strict) of each system, on the replayed stores,

for three arms: ``assembly`` (``Memory.context`` at 2,000 and 8,000 tokens,
query = the user turn just added, or the latest user request in the agent loop),
``whole history`` (every turn so far: prefix-stable, unbounded) and, on the
agent transcript, ``wrap`` (the live list ``Compactor.prepare_messages`` leaves:
what ``stratamem.wrap(client)`` sends) and ``wrap layout`` (the same wrapper over a memory with
``context.cache_layout`` on: what it sends then). See ``benchmarks/cache/replay.py``.

Systems compared in one run (each in its own process, the same benchmark code):

* ``today`` — this tree, or ``--baseline REV`` (``git archive REV src`` into a temporary directory);
* ``--set KEY=VALUE`` (repeatable) — this tree again with configuration overrides
  (the later implementation's mode, e.g. ``--set context.cache_layout=true``);
* ``--src PATH`` — another tree's ``src`` (with the ``--set`` overrides too).

Usage::

    .venv/bin/python benchmarks/cache_bench.py                 # LoCoMo 0-2 + agent transcript, ~12 min on a busy box
    .venv/bin/python benchmarks/cache_bench.py --quick         # LoCoMo 0 (8 sessions) + 12-turn transcript
    .venv/bin/python benchmarks/cache_bench.py --conversations 0 1 2 3 4 5 6 7 8 9
    .venv/bin/python benchmarks/cache_bench.py --baseline 9a3365c --set context.cache_layout=true
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.cache.billing import PRICE_DATE, PRICES, dollars  # noqa: E402

WORKER = ROOT / "benchmarks" / "cache" / "replay.py"
OPENAI_MODELS = ("gpt-4.1", "gpt-5")
ANTHROPIC_MODEL = "claude-sonnet-4-6"


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def _systems(args: argparse.Namespace, tmp: Path) -> list[tuple[str, Path, dict[str, Any]]]:
    """``(label, src, config overrides)`` of each system, ``today`` first."""
    sets = {k: _value(v) for k, v in (s.split("=", 1) for s in args.set)}
    out: list[tuple[str, Path, dict[str, Any]]] = []
    if args.baseline:
        src = tmp / "baseline"
        src.mkdir()
        tar = subprocess.run(
            ["git", "-C", str(ROOT), "archive", args.baseline, "src"], capture_output=True, check=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=tar, check=True)
        out.append((f"today @{args.baseline}", src / "src", {}))
        out.append(("this tree" + (f" {sets}" if sets else ""), ROOT / "src", sets))
    else:
        out.append(("today (this tree)", ROOT / "src", {}))
        if sets:
            out.append((f"this tree {sets}", ROOT / "src", sets))
    if args.src:
        out.append((f"src {args.src}" + (f" {sets}" if sets else ""), Path(args.src).resolve(), sets))
    return out


def _run(label: str, src: Path, sets: dict[str, Any], args: argparse.Namespace, whole: bool, out: Path) -> dict:
    cmd = [
        sys.executable,
        str(WORKER),
        "--out",
        str(out),
        "--budgets",
        *map(str, args.budgets),
        "--formats",
        *args.formats,
        "--embed",
        args.embed,
        "--set",
        json.dumps(sets),
        "--sessions",
        str(args.sessions),
        "--agent-turns",
        str(args.agent_turns),
        "--agent-threshold",
        str(args.agent_threshold),
    ]
    if args.conversations:
        cmd += ["--locomo", *map(str, args.conversations)]
    if not args.no_agent:
        cmd.append("--agent")
    if whole:
        cmd.append("--whole")
    if not args.no_recall:
        cmd.append("--recall")
    if args.one_cache:
        cmd.append("--one-cache")
    t = time.perf_counter()
    done = subprocess.run(cmd, env={**os.environ, "PYTHONPATH": str(src)}, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{label} failed:\n{done.stderr[-4000:]}")
    result = json.loads(out.read_text())
    result["label"], result["wall"] = label, time.perf_counter() - t
    return result


# --- arithmetic on the workers' sums -----------------------------------------------------------------


def _bills(row: dict[str, Any]) -> dict[str, float]:
    """USD of a row's calls for every model of its format (Anthropic: as sent and with caller breakpoints)."""
    out: dict[str, float] = {}
    summ = row.get("summarizer", 0)  # the wrap arm's checkpoint calls, uncached
    if row["format"] == "openai":
        for name in OPENAI_MODELS:
            cached = row["openai_cached"]
            out[name] = dollars(PRICES[name], row["tokens"] - cached + summ, cached)
        return out
    for name, price in PRICES.items():
        if price.provider != "anthropic":
            continue
        for policy in ("sent", "rolling"):
            read, write, plain = row["anthropic"][f"{price.min_tokens}/{policy}"]
            out[f"{name} {policy}"] = dollars(price, plain + summ, read, write)
        out[f"{name} best"] = min(out[f"{name} sent"], out[f"{name} rolling"])
    return out


def _merge(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Sum rows of one arm over conversations (the median per call is the median of medians)."""
    keys = ("calls", "tokens", "lcp", "openai_cached", "breakpoints", "compactions", "chain", "unit_tokens")
    out: dict[str, Any] = {k: sum(r[k] for r in rows) for k in keys}
    out["no_window"] = sum(r.get("no_window", 0) for r in rows)
    out["unseen"] = sum(r.get("unseen", 0) for r in rows)
    out["summarizer"] = sum(r.get("summarizer", 0) for r in rows)
    out["format"] = rows[0]["format"]
    out["anthropic"] = {k: [sum(r["anthropic"][k][i] for r in rows) for i in range(3)] for k in rows[0]["anthropic"]}
    out["where"] = sum((Counter(r["where"]) for r in rows), Counter())
    out["causes"] = sum((Counter(r.get("causes", {})) for r in rows), Counter())
    out["lost"] = sum((Counter(r.get("lost", {})) for r in rows), Counter())
    out["uncached"] = sum((Counter(r.get("uncached", {})) for r in rows), Counter())
    out["parts"] = sum((Counter(r.get("parts", {})) for r in rows), Counter())
    out["carried"] = sum((Counter(r.get("carried", {})) for r in rows), Counter())
    for key in ("share_median", "lcp_median"):
        meds = sorted(r[key] for r in rows)
        out[key] = meds[len(meds) // 2]
    return out


def _money(x: float) -> str:
    return f"{x:,.2f}"


def _summary(results: list[dict], dataset: str, fmt: str) -> list[str]:
    """One table: every system's arms at every budget, summed over the dataset's conversations."""
    groups: dict[tuple[str, str, Any], list[dict]] = defaultdict(list)
    for res in results:
        for r in res["rows"]:
            if r["dataset"] == dataset and r["format"] == fmt:
                label = "whole history" if r["arm"] == "whole history" else f"{res['label']}: {r['arm']}"
                groups[(label, r["arm"], r["budget"])].append(r)
    if not groups:
        return []
    models = list(OPENAI_MODELS) if fmt == "openai" else [f"{ANTHROPIC_MODEL} sent", f"{ANTHROPIC_MODEL} rolling"]
    head = (
        "| arm | B | calls | tokens/call | prefix share | median/call | 1st change at (median token) | "
        + ("cached (OpenAI) | " if fmt == "openai" else "read / written (Sonnet, rolling) | ")
        + " | ".join(f"$ per 1k calls {m}" for m in models)
        + " | x today |"
    )
    lines = [f"\n{dataset} · format {fmt} (all conversations replayed)\n", head, "|" + "---|" * (head.count("|") - 1)]
    today = results[0]["label"]
    key = models[0] if fmt == "openai" else f"{ANTHROPIC_MODEL} best"
    merged = {k: _merge(rows) for k, rows in groups.items()}
    # Today's bill per (arm, budget): what each row is held against ("x today").
    base = {(arm, budget): _bills(m)[key] for (label, arm, budget), m in merged.items() if label == f"{today}: {arm}"}
    order = {res["label"]: i for i, res in enumerate(results)}
    for (label, arm, budget), m in sorted(
        merged.items(),
        key=lambda kv: (kv[0][2] is None, kv[0][2] or 0, kv[0][1], order.get(kv[0][0].rsplit(": ", 1)[0], 99)),
    ):
        bills = _bills(m)
        if arm == "whole history":
            refs = [base.get(("assembly", b)) for b in sorted({b for (a, b) in base if a == "assembly"})]
            ratio = " / ".join(f"{r / bills[key]:.2f}" for r in refs if r) or "-"
        else:
            ref = base.get((arm, budget))
            ratio = f"{ref / bills[key]:.2f}" if ref and bills[key] else "-"
        if fmt == "openai":
            cache = f"{m['openai_cached'] / m['tokens']:.1%}"
        else:
            read, write, _ = m["anthropic"][f"{PRICES[ANTHROPIC_MODEL].min_tokens}/rolling"]
            cache = f"{read / m['tokens']:.1%} / {write / m['tokens']:.1%}"
        per = 1000 / m["calls"]
        if m["compactions"]:
            label += (
                f" ({m['compactions']} compactions, checkpoint input {m['summarizer'] / m['calls']:,.0f} tokens/call)"
            )
        lines.append(
            f"| {label} | {budget or '-'} | {m['calls']:,} | {m['tokens'] / m['calls']:,.0f} | "
            f"{m['lcp'] / m['tokens']:.1%} | {m['share_median']:.1%} | {m['lcp_median']:,.0f} | {cache} | "
            + " | ".join(_money(bills[x] * per) for x in models)
            + f" | {ratio} |"
        )
    return lines


def _per_conversation(results: list[dict]) -> list[str]:
    lines = [
        "\nper conversation: prefix share · $ per 1k calls (gpt-4.1 | Sonnet 4.6, cheaper of as sent and "
        "rolling breakpoints)\n",
        "| conversation | system: arm | B | openai prefix | gpt-4.1 | anthropic prefix | Sonnet 4.6 |",
        "|---|---|---|---|---|---|---|",
    ]
    keyed: dict[tuple, dict[str, dict]] = defaultdict(dict)
    for res in results:
        for r in res["rows"]:
            label = "whole history" if r["arm"] == "whole history" else f"{res['label']}: {r['arm']}"
            keyed[(r["dataset"], r["conv"], label, r["budget"] or 0)][r["format"]] = r
    for (dataset, conv, label, budget), by_fmt in sorted(keyed.items()):
        cells = []
        for fmt, model in (("openai", "gpt-4.1"), ("anthropic", f"{ANTHROPIC_MODEL} best")):
            r = by_fmt.get(fmt)
            if r is None:
                cells += ["-", "-"]
                continue
            cells += [f"{r['lcp'] / r['tokens']:.1%}", _money(_bills(r)[model] * 1000 / r["calls"])]
        lines.append(f"| {dataset} {conv} | {label} | {budget or '-'} | " + " | ".join(cells) + " |")
    return lines


def _where(results: list[dict]) -> list[str]:
    lines = ["\nwhere the first changed token falls (share of calls; assembly and wrap arms)\n"]
    for res in results:
        for dataset in ("locomo", "agent"):
            for fmt in ("openai", "anthropic"):
                for arm in ("assembly", "wrap"):
                    rows = [
                        r for r in res["rows"] if r["dataset"] == dataset and r["format"] == fmt and r["arm"] == arm
                    ]
                    for budget in sorted({r["budget"] or 0 for r in rows}):
                        c = sum((Counter(r["where"]) for r in rows if (r["budget"] or 0) == budget), Counter())
                        n = sum(c.values())
                        top = ", ".join(f"{k} {v / n:.0%}" for k, v in c.most_common(4))
                        lines.append(f"- {res['label']} · {dataset} {arm} {fmt} B={budget or '-'}: {top}")
    return lines


def _causes(results: list[dict]) -> list[str]:
    """Why prompts lost their prefix: per cause, the share of calls and of all prompt tokens lost."""
    lines = ["\nwhy the prefix changed (assembly arm: share of calls · prompt tokens lost, share of all tokens)\n"]
    for res in results:
        for dataset in ("locomo", "agent"):
            for fmt in ("openai", "anthropic"):
                rows = [
                    r for r in res["rows"] if r["dataset"] == dataset and r["format"] == fmt and r["arm"] == "assembly"
                ]
                for budget in sorted({r["budget"] for r in rows}):
                    m = _merge([r for r in rows if r["budget"] == budget])
                    n = sum(m["causes"].values()) or 1
                    top = ", ".join(
                        f"{k} {v / n:.0%} · {m['lost'][k] / m['tokens']:.1%}" for k, v in m["causes"].most_common()
                    )
                    lines.append(f"- {res['label']} · {dataset} {fmt} B={budget}: {top}")
    return lines


def _uncached(results: list[dict]) -> list[str]:
    """The tokens each call sends past its common prefix with the previous call, by what they are.

    Per call kind (``request``: a person's words arrived; ``step``: tool results only) and the cause
    of the break (the first of ledger changed, window start moved, per call), the uncached tokens
    by content: ``new`` (pieces the previous prompt did not hold: the newest turns), ``re-sent`` (pieces
    it held, after the break), ``recall block`` (L4), ``system / ledger``. Shares of all prompt tokens.
    """
    lines = [
        "\nuncached tokens (assembly arm, agent transcript): share of all prompt tokens by call kind · "
        "cause of the break · content (the prefix share is 100 % minus their sum)\n"
    ]
    for res in results:
        for fmt in ("openai", "anthropic"):
            rows = [r for r in res["rows"] if r["dataset"] == "agent" and r["format"] == fmt and r["arm"] == "assembly"]
            for budget in sorted({r["budget"] for r in rows}):
                m = _merge([r for r in rows if r["budget"] == budget])
                u, total = m["uncached"], m["tokens"] or 1
                if not u:
                    continue
                by_content: Counter[str] = Counter()
                by_kind: Counter[str] = Counter()
                for key, v in u.items():
                    kind, _, content = key.split("|")
                    by_content[content] += v
                    by_kind[kind] += v
                lines.append(
                    f"- {res['label']} · {fmt} B={budget}: uncached {sum(u.values()) / total:.1%} = "
                    + ", ".join(f"{k} {v / total:.1%}" for k, v in by_content.most_common())
                    + " ; by call kind "
                    + ", ".join(f"{k} {v / total:.1%}" for k, v in by_kind.most_common())
                )
                for key, v in sorted(u.items(), key=lambda kv: -kv[1]):
                    if v / total >= 0.002:
                        lines.append(f"    - {key.replace('|', ' · ')}: {v / total:.1%}")
    return lines


def _parts(results: list[dict]) -> list[str]:
    """What the assembled prompts are made of, how much of each part the previous call also held,
    and the prefix share an append-only layout of the same selection could keep (the reorder bound)."""
    lines = [
        "\nwhat the assembly arm's prompts hold (openai format; manifest item tokens by reason: share of "
        "the prompt · share of that part's tokens also in the previous call's prompt)\n"
    ]
    for res in results:
        for dataset in ("locomo", "agent"):
            for budget in sorted({r["budget"] for r in res["rows"] if r["arm"] == "assembly"}):
                rows = [
                    r
                    for r in res["rows"]
                    if r["dataset"] == dataset
                    and r["arm"] == "assembly"
                    and r["budget"] == budget
                    and r["format"] == "openai"
                ]
                if not rows:
                    continue
                m = _merge(rows)
                c, carried = m["parts"], m["carried"]
                n = sum(c.values()) or 1
                lines.append(
                    f"- {res['label']} · {dataset} B={budget}: "
                    + ", ".join(f"{k} {v / n:.0%} · {carried.get(k, 0) / v:.0%}" for k, v in c.most_common())
                    + f"; reorder bound {m['chain'] / max(1, m['unit_tokens']):.1%} "
                    f"(measured prefix share {m['lcp'] / m['tokens']:.1%})"
                )
    return lines


def _unseen(results: list[dict]) -> list[str]:
    """Calls whose prompt has no window, and calls whose prompt lacks a turn stored since the call before."""
    lines = [
        "\nwhat the model sees (assembly arm): calls with no window · calls whose prompt lacks a turn stored "
        "since the previous call (the newest message or tool results)\n"
    ]
    for res in results:
        for dataset in ("locomo", "agent"):
            for fmt in ("openai", "anthropic"):
                rows = [
                    r for r in res["rows"] if r["dataset"] == dataset and r["format"] == fmt and r["arm"] == "assembly"
                ]
                for budget in sorted({r["budget"] for r in rows}):
                    m = _merge([r for r in rows if r["budget"] == budget])
                    lines.append(
                        f"- {res['label']} · {dataset} {fmt} B={budget}: no window {m['no_window']} · "
                        f"newest unseen {m['unseen']} of {m['calls']} calls"
                    )
    return lines


def _recall(results: list[dict]) -> list[str]:
    lines = ["\nrecall b@2048 (strict; Memory.context(question, budget=2048, format='text', policy='hybrid'))\n"]
    for res in results:
        rec = res["recall"]
        if not rec:
            continue
        n = sum(v["n"] for v in rec.values())
        mean = sum(v["b@2048"] * v["n"] for v in rec.values()) / max(1, n)
        per = ", ".join(f"{k} {v['b@2048']:.3f}" for k, v in sorted(rec.items()))
        lines.append(f"- {res['label']}: {mean:.3f} over {n} questions ({per})")
    return lines


def main(argv: list[str] | None = None) -> None:
    """Run every system's replays and print the tables."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, nargs="*", default=None, help="LoCoMo positions (default 0 1 2)")
    ap.add_argument("--sessions", type=int, default=0, help="first N sessions per conversation (0: all)")
    ap.add_argument("--agent-turns", type=int, default=None, help="user turns of the agent transcript (default 20)")
    ap.add_argument("--agent-threshold", type=int, default=20_000, help="compaction threshold of the wrap arm")
    ap.add_argument("--no-agent", action="store_true")
    ap.add_argument("--no-recall", action="store_true")
    ap.add_argument("--budgets", type=int, nargs="*", default=[2000, 8000], help="none: no assembly arm")
    ap.add_argument("--formats", nargs="+", default=["openai", "anthropic"])
    ap.add_argument(
        "--embed",
        choices=("local", "none"),
        default="local",
        help="turn vectors: local MiniLM (cached under /tmp) or none (lexical recall)",
    )
    ap.add_argument("--baseline", help="git revision whose src is 'today' (default: this tree)")
    ap.add_argument("--src", help="another tree's src directory, run beside today")
    ap.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="configuration override for the candidate row (e.g. context.dedup=false)",
    )
    ap.add_argument(
        "--one-cache",
        action="store_true",
        help="keep provider caches across LoCoMo sessions (upper bound; real sessions are days apart)",
    )
    ap.add_argument("--quick", action="store_true", help="LoCoMo 0, first 8 sessions; 12-turn agent transcript")
    ap.add_argument("--json", type=Path, help="also write the raw results here")
    args = ap.parse_args(argv)
    if args.quick:
        args.conversations = args.conversations or [0]
        args.sessions = args.sessions or 8
        args.agent_turns = args.agent_turns or 12
    args.agent_turns = args.agent_turns or 20
    if args.conversations is None:
        args.conversations = [0, 1, 2]
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        systems = _systems(args, Path(tmp))
        results = [
            _run(label, src, sets, args, i == 0, Path(tmp) / f"{i}.json")
            for i, (label, src, sets) in enumerate(systems)
        ]
    out = [
        f"prompt caching replay: LoCoMo conversations {args.conversations}"
        + (f" (first {args.sessions} sessions)" if args.sessions else "")
        + ("" if args.no_agent else f"; agent transcript, {args.agent_turns} user turns")
        + f"; budgets {args.budgets}; prices of {PRICE_DATE} (benchmarks/cache/billing.py)"
    ]
    for res in results:
        out.append(
            f"- {res['label']}: {res['stratamem']} {res['set'] or ''} — {res['wall']:.0f} s "
            f"({', '.join(f'{k} {v:.0f} s' for k, v in res['seconds'].items())}), load {res['load']:.1f}"
        )
    for dataset in ("locomo", "agent"):
        for fmt in args.formats:
            out += _summary(results, dataset, fmt)
    out += _per_conversation(results)
    out += _where(results)
    out += _causes(results)
    out += _uncached(results)
    out += _parts(results)
    out += _unseen(results)
    out += _recall(results)
    out.append(
        "\n'prefix share': tokens equal to the previous call's longest common token prefix / all prompt "
        "tokens. 'x today': today's bill for the same arm and budget / this row's (whole history: today's "
        "assembly at each budget; OpenAI gpt-4.1; Anthropic: the cheaper of as sent and rolling "
        "breakpoints). Caches are emptied at each LoCoMo session (days apart) unless --one-cache; output "
        "tokens are left out (the same for every arm; a checkpoint's output too). wrap: the checkpoint calls' "
        "input is billed as uncached input at the agent model's price."
    )
    out.append(f"total {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}")
    print("\n".join(out))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
