"""Intake of real transcripts: what each file becomes, and whether a grown log stores only its new turns.

For every file under ``../shared/data/transcripts/`` (recursively, so
``<session>/subagents/*.jsonl`` too), through the public ingest path
(:func:`stratamem.ingest.read_file` then :meth:`stratamem.Memory.ingest`, each
on a fresh SQLite file, pyramid and embeddings off so the table shows intake
alone):

* turns stored, tool pairs (calls answered by a result in the same session),
  sessions, sidechain sessions (a turn marked ``metadata.sidechain``), source
  records skipped on purpose (``IngestSession.skipped``), tool results the
  reader had to turn into text because no call matched (``orphan_tool_results``),
  the error if the file was refused (type and message), and the median wall time
  of read + ingest;
* **grown log**: the first half of the file (by lines, so a reply may be cut
  mid-stream — that is the point) is ingested, then the whole file, into one
  fresh store; the result is compared turn for turn (session, position in the
  session, role, content, time, name, model, metadata) with a single whole-file
  ingest. The table shows turns stored by each pass, whether the two stores are
  equal, and the first difference. The half file keeps the original's name and
  relative path (importers may read the session from them). A ``.json`` file is
  one document that its tool rewrites whole, so it has no grown-log row (``n/a``);
* with ``--mutations N``: copies of each file with one line broken (cut JSON, a
  non-object line, ``content`` of the wrong type, a bad ``timestamp``; up to N
  lines per file and kind), and whether the error names the file and that line.

Each source tree runs in its own subprocess with ``PYTHONPATH`` set to its
``src``: this checkout (unless ``--no-this``), every ``--src PATH`` (a
checkout or its ``src`` folder) and every ``--baseline REV`` (extracted with
``git archive`` into a temporary directory), so a fix shows beside today's
code in one table, rows of one file together::

    python benchmarks/intake_bench.py --baseline main
    python benchmarks/intake_bench.py --no-this --baseline 9a3365c --json /tmp/intake.json

Only public names are used (``stratamem.Memory``, ``stratamem.Config``,
``stratamem.ingest.read_file``, ``IngestReport``/``IngestSession`` fields,
``StoredTurn.turn.to_dict()``), so a restructured tree runs unchanged.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT.parent / "shared" / "data" / "transcripts"
SUFFIXES = (".jsonl", ".json", ".ndjson")
MARKDOWN = ".chat.history.md"  # aider's history; other Markdown files are documentation

# Runs inside the tree's own interpreter process; prints one JSON object per file.
_WORKER = r'''
import json, statistics, sys, time
from pathlib import Path

from stratamem import Config, Memory
from stratamem.ingest import read_file

args = json.loads(sys.argv[1])
data, scratch, repeat = Path(args["data"]), Path(args["scratch"]), args["repeat"]
try:
    CONFIG = Config().replace(pyramid={"enabled": False})
except Exception:  # noqa: BLE001 - a tree without that option: its default configuration
    CONFIG = None


def memory(db):
    try:
        return Memory(db, config=CONFIG, embedder=None)
    except TypeError:
        return Memory(db, config=CONFIG)


def lines_of(text):
    """Lines ending in "\\n" (kept): U+2028, U+2029 and U+0085 inside a JSON string are not line breaks."""
    parts = text.split("\n")
    return [p + "\n" for p in parts[:-1]] + ([parts[-1]] if parts[-1] else [])


def error(exc):
    return f"{type(exc).__name__}: {exc}"


def snapshot(mem):
    """Every stored turn as comparable data, session by session, in order."""
    # Position within the session, not the store's seq: a fix may retract and re-append a
    # regrown tail, and what must match is the order of what is stored.
    out = []
    rows = sorted(mem.turns(), key=lambda st: (st.session, st.seq))
    at = {}
    for st in rows:
        at[st.session] = at.get(st.session, 0) + 1
        out.append({"session": st.session, "position": at[st.session], **st.turn.to_dict()})
    return out


def describe(mem, sessions):
    """What the store holds after one file: turns, answered calls, sessions, sidechains, skips, orphans."""
    turns = mem.turns()
    uses, results = {}, {}
    for st in turns:
        for i in st.turn.tool_use_ids:
            uses.setdefault(st.session, set()).add(i)
        for i in st.turn.tool_result_ids:
            results.setdefault(st.session, set()).add(i)
    pairs = sum(len(uses.get(s, set()) & r) for s, r in results.items())
    names = {st.session for st in turns}
    side = {st.session for st in turns if (st.turn.metadata or {}).get("sidechain") is True}
    orphans = sum(len((st.turn.metadata or {}).get("orphan_tool_results") or ()) for st in turns)
    return {"turns": len(turns), "tool_pairs": pairs, "sessions": len(names), "sidechains": len(side),
            "skipped": skipped_of(sessions), "orphans": orphans}


def skipped_of(sessions):
    """Source records the reader skipped on purpose, by kind, over the file's sessions."""
    out = {}
    for s in sessions:
        for k, v in dict(getattr(s, "skipped", {}) or {}).items():
            out[k] = out.get(k, 0) + v
    return out


def ingest(mem, path):
    """Read and ingest one file; (report, sessions) or raises."""
    sessions = read_file(path)
    return mem.ingest(sessions), sessions


def first_difference(a, b):
    """Where two snapshots first differ, in a few words ("" when equal)."""
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            keys = [k for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
            where = f"turn {i + 1} ({y.get('session', '?')[:12]} #{y.get('position')}, {y.get('role')})"
            detail = []
            for k in keys[:3]:
                xa, yb = json.dumps(x.get(k), ensure_ascii=False), json.dumps(y.get(k), ensure_ascii=False)
                detail.append(f"{k}: {xa[:70]} vs {yb[:70]}")
            return f"{where}: " + "; ".join(detail)
    if len(a) != len(b):
        return f"half+whole holds {len(a)} turns, whole holds {len(b)}"
    return ""


unbroken = {}  # each file's own error (or ""), to tell it from the error a broken line causes
for rel in args["files"]:
    path = data / rel
    row = {"file": rel, "lines": sum(1 for l in lines_of(path.read_text(encoding="utf-8", errors="replace"))
                                     if l.strip())}
    times = []
    try:
        for r in range(repeat):
            db = scratch / f"whole-{r}.db"
            with memory(db) as mem:
                t = time.perf_counter()
                report, sessions = ingest(mem, path)
                times.append(time.perf_counter() - t)
                if r == 0:
                    row.update(describe(mem, sessions))
                    whole = snapshot(mem)
            db.unlink()
        row["error"] = ""
    except Exception as exc:  # noqa: BLE001 - the error is the measurement
        row.update({"error": error(exc), "turns": 0, "tool_pairs": 0, "sessions": 0, "sidechains": 0,
                    "skipped": {}, "orphans": 0})
        whole = None
        try:
            row["skipped"] = skipped_of(read_file(path))
        except Exception:  # noqa: BLE001 - read_file itself failed
            pass
        for p in scratch.glob("*.db*"):
            p.unlink()
    row["seconds"] = statistics.median(times) if times else None
    # The grown log: first half of the lines, then the whole file, into one store. A whole JSON
    # document (ChatGPT export, Gemini .json session) is rewritten, not appended: no half to read.
    if path.suffix == ".json":
        row["grown"] = {"first": None, "second": None, "equal": None, "diff": "", "error": "n/a (whole JSON document)"}
        unbroken[rel] = row["error"]
        print(json.dumps(row), flush=True)
        continue
    text = path.read_text(encoding="utf-8", errors="surrogateescape")
    lines = lines_of(text)
    half = scratch / "half" / rel
    half.parent.mkdir(parents=True, exist_ok=True)
    half.write_text("".join(lines[: len(lines) // 2]), encoding="utf-8", errors="surrogateescape")
    grown = {"first": None, "second": None, "equal": None, "diff": "", "error": ""}
    db = scratch / "grown.db"
    try:
        with memory(db) as mem:
            try:
                grown["first"] = ingest(mem, half)[0].total_stored
            except Exception as exc:  # noqa: BLE001
                grown["error"] = "half: " + error(exc)
            try:
                grown["second"] = ingest(mem, path)[0].total_stored
            except Exception as exc:  # noqa: BLE001
                grown["error"] = (grown["error"] + "; " if grown["error"] else "") + "whole after half: " + error(exc)
            both = snapshot(mem)
        if whole is not None and grown["second"] is not None:
            grown["diff"] = first_difference(both, whole)
            grown["equal"] = not grown["diff"]
    finally:
        for p in scratch.glob("grown.db*"):
            p.unlink()
        half.unlink()
    row["grown"] = grown
    unbroken[rel] = row["error"]
    print(json.dumps(row), flush=True)

# Error locations: break one line of a copy in a known way; does the error name the file and that line?
MUTATIONS = ("broken JSON", "not an object", "content of wrong type", "bad timestamp")


def mutate(line, kind):
    """The line broken in one way, or None when the mutation does not apply to it."""
    if kind == "broken JSON":
        return line[: max(1, len(line) // 2)]
    if kind == "not an object":
        return "[1, 2, 3]"
    try:
        rec = json.loads(line)
    except ValueError:
        return None
    if not isinstance(rec, dict):
        return None
    if kind == "content of wrong type":
        for holder in (rec.get("message"), rec.get("payload"), rec):
            if isinstance(holder, dict) and "content" in holder:
                holder["content"] = 12345
                return json.dumps(rec)
        return None
    if kind == "bad timestamp" and "timestamp" in rec:
        rec["timestamp"] = "not a time"
        return json.dumps(rec)
    return None


if args["mutations"]:
    for rel in args["files"]:
        path = data / rel
        lines = lines_of(path.read_text(encoding="utf-8"))
        content = [i for i, l in enumerate(lines) if l.strip()]
        # Spread the probes over the file: up to `mutations` lines per kind, evenly spaced.
        step = max(1, len(content) // args["mutations"])
        for kind in MUTATIONS:
            for i in content[::step][: args["mutations"]]:
                broken = mutate(lines[i].rstrip("\r\n"), kind)
                if broken is None:
                    continue
                copy = scratch / "mut" / rel
                copy.parent.mkdir(parents=True, exist_ok=True)
                copy.write_text("".join(lines[:i]) + broken + "\n" + "".join(lines[i + 1:]), encoding="utf-8")
                out = {"mutation": kind, "file": rel, "line": i + 1, "error": ""}
                try:
                    with memory(scratch / "mut.db") as mem:
                        ingest(mem, copy)
                except Exception as exc:  # noqa: BLE001 - the error text is what is measured
                    out["error"] = error(exc)
                finally:
                    for p in scratch.glob("mut.db*"):
                        p.unlink()
                    copy.unlink()
                msg = out["error"]
                # The file's own error (e.g. an unpaired tool result) says nothing about the broken line.
                out["own_error"] = bool(msg) and msg == unbroken.get(rel)
                out["names_file"] = bool(msg) and Path(rel).name in msg
                out["names_line"] = bool(msg) and any(f"{sep}{i + 1}{end}" in msg for sep in ("line ", ":")
                                                      for end in (":", ",", " ", ")"))
                print(json.dumps(out), flush=True)
'''


def files_under(data: Path) -> list[str]:
    """Transcript files below ``data``, relative, in a stable order (READMEs and licences left out)."""
    out = []
    for p in sorted(data.rglob("*")):
        if p.is_file() and (p.suffix in SUFFIXES or p.name.endswith(MARKDOWN)):
            out.append(str(p.relative_to(data)))
    return out


def extract(rev: str, into: Path) -> Path:
    """The ``src`` of git revision ``rev`` of this repository, unpacked under ``into``."""
    into.mkdir(parents=True)
    tar = subprocess.run(["git", "-C", str(ROOT), "archive", rev, "src"], capture_output=True, check=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into / "src"


def src_of(path: str) -> Path:
    """A checkout or its ``src`` folder, as the folder to put on ``PYTHONPATH``."""
    p = Path(path).resolve()
    return p / "src" if (p / "src" / "stratamem").is_dir() else p


def run_tree(name: str, src: Path, files: list[str], data: Path, repeat: int, mutations: int) -> list[dict]:
    """Every file through one tree, in a fresh interpreter with that tree first on the path."""
    with tempfile.TemporaryDirectory(prefix="intake-") as scratch:
        payload = json.dumps(
            {"files": files, "data": str(data), "scratch": scratch, "repeat": repeat, "mutations": mutations}
        )
        env = {**os.environ, "PYTHONPATH": str(src)}
        out = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(_WORKER), payload],
            capture_output=True,
            text=True,
            env=env,
            check=False,
        )
    if out.returncode != 0:
        raise SystemExit(f"{name} failed:\n{out.stderr[-4000:]}")
    rows = [json.loads(line) for line in out.stdout.splitlines() if line.startswith("{")]
    for r in rows:
        r["tree"] = name
    return rows


_UUID = re.compile(r"([0-9a-f]{8})-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def _short(name: str) -> str:
    """A file name with its session uuids cut to 8 characters, so the table stays readable."""
    return _UUID.sub(r"\1…", name)


def _cell(text: str, width: int) -> str:
    text = text.replace("|", "\\|").replace("\n", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def table(rows: list[dict], trees: list[str], width: int) -> str:
    """Markdown table: one row per file and tree, the trees of one file together."""
    head = (
        "| file | tree | lines | turns | tool pairs | sessions | sidechains | skipped | orphan results | "
        "error | ingest s | half: stored | then whole: new | equal | first difference |"
    )
    out = [head, "|---|---|" + "---:|" * 7 + "---|---:|---:|---:|---|---|"]
    by = {(r["file"], r["tree"]): r for r in rows}
    files = list(dict.fromkeys(r["file"] for r in rows))
    for f in files:
        for t in trees:
            r = by.get((f, t))
            if r is None:
                continue
            g = r["grown"]
            skipped = sum(r["skipped"].values())
            secs = "" if r["seconds"] is None else f"{r['seconds']:.3f}"
            equal = "" if g["equal"] is None else ("yes" if g["equal"] else "**no**")
            diff = g["diff"] or g["error"]
            out.append(
                f"| {_short(f)} | {t} | {r['lines']} | {r['turns']} | {r['tool_pairs']} | {r['sessions']} | "
                f"{r['sidechains']} | {skipped} | {r['orphans']} | {_cell(r['error'], width)} | {secs} | "
                f"{'' if g['first'] is None else g['first']} | {'' if g['second'] is None else g['second']} | "
                f"{equal} | {_cell(diff, width)} |"
            )
    return "\n".join(out)


def error_table(rows: list[dict], trees: list[str]) -> str:
    """Per tree and kind of broken line: refused files, and how many errors name the file and the line."""
    out = [
        "| tree | broken line | probes | accepted | refused with the file's own error | refused for the line | "
        "names the file | names the line | names both |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in trees:
        probes = [r for r in rows if r["tree"] == t and "mutation" in r]
        for kind in dict.fromkeys(r["mutation"] for r in probes):
            rs = [r for r in probes if r["mutation"] == kind]
            refused = [r for r in rs if r["error"] and not r["own_error"]]
            own = sum(1 for r in rs if r["own_error"])
            out.append(
                f"| {t} | {kind} | {len(rs)} | {sum(1 for r in rs if not r['error'])} | {own} | "
                f"{len(refused)} | {sum(r['names_file'] for r in refused)} | "
                f"{sum(r['names_line'] for r in refused)} | "
                f"{sum(r['names_file'] and r['names_line'] for r in refused)} |"
            )
    return "\n".join(out)


def summary(rows: list[dict], trees: list[str]) -> str:
    """One line per tree: files refused, grown logs not equal, totals."""
    out = [
        "| tree | files | refused | grown log equal (of appendable files) | turns | tool pairs | skipped records | orphan results |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for t in trees:
        rs = [r for r in rows if r["tree"] == t]
        out.append(
            f"| {t} | {len(rs)} | {sum(1 for r in rs if r['error'])} | "
            f"{sum(1 for r in rs if r['grown']['equal'])} of "
            f"{sum(1 for r in rs if not r['grown']['error'].startswith('n/a'))} | {sum(r['turns'] for r in rs)} | "
            f"{sum(r['tool_pairs'] for r in rs)} | {sum(sum(r['skipped'].values()) for r in rs)} | "
            f"{sum(r['orphans'] for r in rs)} |"
        )
    return "\n".join(out)


def main() -> None:
    """Run every tree over every file and print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DATA, help="folder of transcripts (searched recursively)")
    parser.add_argument("--src", action="append", default=[], help="another checkout (or its src) to run beside")
    parser.add_argument("--baseline", action="append", default=[], help="git revision to run beside (git archive)")
    parser.add_argument("--no-this", action="store_true", help="leave out this checkout")
    parser.add_argument("--repeat", type=int, default=3, help="whole-file ingests timed per file (median)")
    parser.add_argument("--width", type=int, default=90, help="characters of an error or difference in the table")
    parser.add_argument("--json", type=Path, help="also write every row (full error texts, skip kinds) here")
    parser.add_argument(
        "--mutations",
        type=int,
        default=0,
        metavar="N",
        help="also break up to N lines per file and kind, and check the error names file and line",
    )
    args = parser.parse_args()
    data = args.data.resolve()
    files = files_under(data)
    if not files:
        raise SystemExit(f"no transcripts under {data}")
    with tempfile.TemporaryDirectory(prefix="intake-trees-") as d:
        trees: dict[str, Path] = {}
        for rev in args.baseline:
            label = subprocess.run(
                ["git", "-C", str(ROOT), "rev-parse", "--short", rev], capture_output=True, text=True, check=True
            ).stdout.strip()
            trees[f"{rev} ({label})" if label != rev else rev] = extract(rev, Path(d) / f"rev-{len(trees)}")
        for s in args.src:
            trees[s] = src_of(s)
        if not args.no_this:
            trees["this tree"] = ROOT / "src"
        rows: list[dict] = []
        for name, src in trees.items():
            rows.extend(run_tree(name, src, files, data, args.repeat, args.mutations))
    names = list(trees)
    load = os.getloadavg()
    print(
        f"Transcripts under {data}: {len(files)} files; trees: {', '.join(names)}; pyramid and embeddings off; "
        f"ingest s = median of {args.repeat} (read_file + Memory.ingest, fresh SQLite file each); "
        f"load average {load[0]:.1f} {load[1]:.1f}\n"
    )
    files_rows = [r for r in rows if "mutation" not in r]
    print(summary(files_rows, names) + "\n")
    print(table(files_rows, names, args.width))
    if args.mutations:
        print(
            "\nErrors for broken lines (a copy of each file with one line broken; up to "
            f"{args.mutations} lines per file and kind, spread over the file):\n"
        )
        print(error_table(rows, names))
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, ensure_ascii=False), encoding="utf-8")


if __name__ == "__main__":
    main()
