"""Generate ``src/stratamem/data/sample_conversation.jsonl``, the demo conversation.

The story: Dana Okafor and a coding agent build the order service of Larkspur
Roasters, a small coffee webshop, over six sessions between 2 and 20 March
2026. Early sessions settle the database (SQLite first), the payment retry
policy and the naming conventions; a bug hunt follows; after an eleven-day gap
a load test forces a move to PostgreSQL and a new retry policy. The last
sessions never restate the early decisions, so a question such as "What did we
decide about the database and the retry policy?" can only be answered by
recalling turns from days before.

The dialogue, code and tool outputs are data: ``scripts/sample/story.yaml``
(platform, channel, system prompt, the sessions in order) and one file per
session, ``scripts/sample/<n>-<session>.yaml``: its name, its start time and
its steps, each one of

* ``pause: <minutes>`` — time passes without messages;
* ``user: <text>`` (``name:`` when the speaker is not ``dana``) and ``bot: <text>``;
* a tool step: one call, or ``tools: [<call>, ...]`` made in one assistant
  message, with optional ``say:`` (the message's text) and ``secs:`` (seconds
  each result takes, default 2). A call is ``read: <path>`` + ``text``,
  ``write: <path>`` + ``content``, ``edit: <path>`` + ``old`` + ``new``
  (``result`` when not the usual one), ``run: <command>`` + ``output``,
  ``search: <pattern>`` + ``path`` + ``output``, or ``tool: <name>`` +
  ``args`` + ``result``.

This script adds what is mechanical: timestamps (from text length and the
pauses), tool call ids (stable hashes), the OpenAI Chat Completions shape
(assistant ``tool_calls`` answered by ``tool`` messages), and ``session``,
``platform``, ``channel`` and ``timestamp`` on each JSON Lines record.

Run from the repository root; the output is byte-for-byte reproducible::

    python scripts/make_sample.py            # rewrite the bundled file
    python scripts/make_sample.py --check    # exit 1 if the bundled file is stale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import yaml

OUT = Path(__file__).resolve().parents[1] / "src" / "stratamem" / "data" / "sample_conversation.jsonl"
STORY = Path(__file__).resolve().parent / "sample"

Call = tuple[str, dict[str, Any], str]


def _typed(text: str) -> int:
    """Characters the timing model counts for a user or bot text.

    A block text (a YAML ``|`` value, ending in a line break) counts one more: the
    sample was first written as triple-quoted literals that also began with one,
    and the bundled file's timestamps were made from those lengths.
    """
    return len(text) + (1 if text.endswith("\n") else 0)


class Session:
    """Builds the messages of one session with deterministic timestamps."""

    def __init__(self, name: str, start: str, setting: Mapping[str, Any]) -> None:
        self.name = name
        self.clock = datetime.fromisoformat(start).replace(tzinfo=UTC)
        self.setting = setting
        self.records: list[dict[str, Any]] = []
        self._calls = 0
        self._emit({"role": "system", "content": setting["system_prompt"]}, 0)

    def _emit(self, message: dict[str, Any], seconds: float) -> None:
        self.clock += timedelta(seconds=round(seconds))
        self.records.append(
            {
                "session": self.name,
                "platform": self.setting["platform"],
                "channel": self.setting["channel"],
                "timestamp": self.clock.strftime("%Y-%m-%dT%H:%M:%SZ"),
                **message,
            }
        )

    def pause(self, minutes: float) -> None:
        """Time passes without messages (a meeting, lunch, a long build)."""
        self.clock += timedelta(minutes=minutes)

    def user(self, text: str, name: str = "dana") -> None:
        """A human message; typing time grows with length."""
        # Reading the last reply and typing: longer messages take longer, up to 7 minutes.
        self._emit({"role": "user", "name": name, "content": text.strip()}, min(45 + _typed(text) / 2.5, 420))

    def bot(self, text: str) -> None:
        """An assistant reply."""
        self._emit({"role": "assistant", "content": text.strip()}, 6 + _typed(text) / 40)

    def tools(self, *calls: Call, say: str | None = None, secs: float = 2) -> None:
        """One assistant message making ``calls`` (name, arguments, result), then their results."""
        ids = []
        for _ in calls:
            self._calls += 1
            digest = hashlib.sha256(f"{self.name}/{self._calls}".encode()).hexdigest()
            ids.append("call_" + digest[:24])
        message: dict[str, Any] = {
            "role": "assistant",
            "content": say.strip() if say else None,
            "tool_calls": [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
                for cid, (name, args, _) in zip(ids, calls, strict=True)
            ],
        }
        # Generating the arguments takes time too (a long file is written out in full).
        args_chars = sum(len(json.dumps(args)) for _, args, _ in calls)
        self._emit(message, 3 + (len(say) / 40 if say else 0) + args_chars / 150)
        for cid, (_, _, result) in zip(ids, calls, strict=True):
            self._emit({"role": "tool", "tool_call_id": cid, "content": result.strip("\n")}, secs)


def call(step: Mapping[str, Any]) -> Call:
    """A tool call ``(name, arguments, result)`` from its data (see the module docstring)."""
    if "read" in step:
        return ("read_file", {"path": step["read"]}, step["text"])
    if "write" in step:
        path, body = step["write"], step["content"].strip("\n") + "\n"
        return ("write_file", {"path": path, "content": body}, f"wrote {len(body.encode())} bytes to {path}")
    if "edit" in step:
        path = step["edit"]
        return (
            "edit_file",
            {"path": path, "old": step["old"], "new": step["new"]},
            step.get("result") or f"edited {path}: 1 replacement",
        )
    if "run" in step:
        return ("run", {"command": step["run"]}, step["output"])
    if "search" in step:
        return ("search", {"pattern": step["search"], "path": step["path"]}, step["output"])
    if "tool" in step:
        return (step["tool"], dict(step["args"]), step["result"])
    raise ValueError(f"not a step the sample knows: {sorted(step)}")


def play(data: Mapping[str, Any], setting: Mapping[str, Any]) -> Session:
    """One session's records from its data file."""
    session = Session(data["session"], data["start"], setting)
    for step in data["steps"]:
        if "pause" in step:
            session.pause(step["pause"])
        elif "user" in step:
            session.user(step["user"], step.get("name", "dana"))
        elif "bot" in step:
            session.bot(step["bot"])
        else:
            calls = [call(c) for c in step["tools"]] if "tools" in step else [call(step)]
            session.tools(*calls, say=step.get("say"), secs=step.get("secs", 2))
    return session


def build(story: Path = STORY) -> list[dict[str, Any]]:
    """All records of the sample, in order."""
    setting = yaml.safe_load((story / "story.yaml").read_text(encoding="utf-8"))
    records: list[dict[str, Any]] = []
    for name in setting["sessions"]:
        records.extend(play(yaml.safe_load((story / name).read_text(encoding="utf-8")), setting).records)
    return records


def render(records: list[dict[str, Any]]) -> str:
    """JSON Lines text of ``records`` (compact, UTF-8, one message a line)."""
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) the bundled sample."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the bundled file is up to date")
    parser.add_argument("--out", type=Path, default=OUT, help="output path")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python scripts/make_sample.py", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} messages to {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
