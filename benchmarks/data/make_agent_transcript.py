"""Write a long, deterministic coding-agent transcript (Anthropic Messages JSON Lines).

The transcript was written for stratamem's agent-loop benchmark: a user asks
an agent for a series of changes to a made-up Python project, and the agent
answers each request with a tool loop — reading files, grepping, running the
test suite, editing — whose outputs are large (source listings, pytest logs,
grep hits). Everything comes from a seeded ``random.Random``, so the same
arguments always give the same bytes.

Usage::

    python benchmarks/data/make_agent_transcript.py --turns 40 --out /tmp/agent.jsonl

Each line is one message: ``{"role": ..., "content": ...}``.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from typing import Any

MODULES = [
    "billing/invoice.py",
    "billing/tax.py",
    "api/routes.py",
    "api/auth.py",
    "core/models.py",
    "core/cache.py",
    "workers/queue.py",
    "workers/retry.py",
    "cli/main.py",
    "db/migrations.py",
    "db/session.py",
    "utils/dates.py",
]
TASKS = [
    "add a currency field to invoices",
    "fix the flaky retry test",
    "make the cache TTL configurable",
    "log slow queries over 200 ms",
    "support pagination on /orders",
    "rename Customer.email_addr",
    "drop Python 3.9 support",
    "add a --dry-run flag to the CLI",
    "handle leap days in due dates",
    "stop double-charging on timeouts",
    "add an index on orders.created_at",
    "refresh tokens on 401",
]
NAMES = ["total", "amount", "customer", "invoice_id", "retries", "ttl", "cursor", "limit", "session", "rate"]


def _source(rng: random.Random, module: str, lines: int) -> str:
    out = [f'"""{module}: part of the acme service."""', "", "from __future__ import annotations", ""]
    for i in range(lines // 6):
        name = f"{rng.choice(NAMES)}_{i}"
        out += [
            f"def {name}(value: int, *, factor: float = {rng.randint(1, 9)}.5) -> float:",
            f'    """Return {name} scaled by factor."""',
            f"    if value < {rng.randint(0, 50)}:",
            f"        raise ValueError('{name} below minimum')",
            f"    return value * factor + {rng.randint(0, 999)}",
            "",
        ]
    return "\n".join(f"{n + 1:5d}  {line}" for n, line in enumerate(out))


def _pytest_log(rng: random.Random, failures: int, tests: int) -> str:
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.2, pluggy-1.5.0",
        f"collected {tests} items",
        "",
    ]
    for module in MODULES:
        dots = "".join(rng.choice("...........F" if failures else ".") for _ in range(tests // len(MODULES)))
        out.append(f"tests/test_{module.replace('/', '_')} {dots}")
    for k in range(failures):
        module = rng.choice(MODULES)
        out += [
            "",
            f"___________________ test_{rng.choice(NAMES)}_{k} ___________________",
            "",
            *[f"    {rng.choice(NAMES)} = {rng.randint(0, 10**6)}" for _ in range(12)],
            f">       assert result == {rng.randint(0, 500)}",
            f"E       AssertionError: assert {rng.randint(0, 500)} == {rng.randint(0, 500)}",
            f"src/acme/{module}:{rng.randint(10, 400)}: AssertionError",
        ]
    out.append(f"=========== {failures} failed, {tests - failures} passed in {rng.uniform(3, 40):.2f}s ===========")
    return "\n".join(out)


def _grep(rng: random.Random, pattern: str, hits: int) -> str:
    return "\n".join(
        f"src/acme/{rng.choice(MODULES)}:{rng.randint(1, 900)}:    {pattern} = "
        f"{rng.choice(NAMES)}({rng.randint(0, 99)})  # {rng.choice(TASKS)}"
        for _ in range(hits)
    )


def messages(turns: int = 40, seed: int = 7) -> Iterator[dict[str, Any]]:
    """Yield the transcript's messages in order (Anthropic Messages shape)."""
    rng = random.Random(seed)
    call = 0
    for t in range(turns):
        task = TASKS[t % len(TASKS)]
        module = MODULES[(t * 5) % len(MODULES)]
        yield {
            "role": "user",
            "content": f"Next: {task}. Start in src/acme/{module}. "
            f"Keep the public API stable and run the full test suite before you stop.",
        }
        steps = rng.randint(5, 12)
        for s in range(steps):
            call += 1
            kind = ["read", "grep", "test", "edit", "read", "test"][s % 6]
            target = rng.choice(MODULES)
            if kind == "read":
                tool, args, out = (
                    "read_file",
                    {"path": f"src/acme/{target}"},
                    _source(rng, target, rng.randint(150, 600)),
                )
            elif kind == "grep":
                pattern = rng.choice(NAMES)
                tool, args, out = (
                    "grep",
                    {"pattern": pattern, "path": "src/"},
                    _grep(rng, pattern, rng.randint(40, 160)),
                )
            elif kind == "test":
                tool, args = "bash", {"command": "pytest -q tests/"}
                out = _pytest_log(rng, rng.randint(0, 6), rng.randint(300, 900))
            else:
                tool, args = (
                    "edit_file",
                    {"path": f"src/acme/{target}", "old": f"{rng.choice(NAMES)}_1", "new": f"{rng.choice(NAMES)}_2"},
                )
                out = f"Edited src/acme/{target}: 1 replacement."
            tid = f"toolu_{call:05d}"
            yield {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": f"Step {s + 1}: {kind} {target} for '{task}'."},
                    {"type": "tool_use", "id": tid, "name": tool, "input": args},
                ],
            }
            yield {"role": "user", "content": [{"type": "tool_result", "tool_use_id": tid, "content": out}]}
        yield {
            "role": "assistant",
            "content": f"Done: {task}. Changed src/acme/{module}; the test suite passes "
            f"({rng.randint(300, 900)} tests). Decision: kept the old name "
            f"as an alias for one release.",
        }


def main(argv: list[str] | None = None) -> int:
    """Write the transcript as JSON Lines."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--turns", type=int, default=40)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", default="-", help="output file (default: stdout)")
    args = ap.parse_args(argv)
    out = sys.stdout if args.out == "-" else open(args.out, "w", encoding="utf-8")
    with out if out is not sys.stdout else open(1, "w", closefd=False) as fh:
        for m in messages(args.turns, args.seed):
            fh.write(json.dumps(m, ensure_ascii=False) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
