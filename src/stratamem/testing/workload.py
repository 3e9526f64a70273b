"""The crash drill's workload: a child process that keeps the pyramid and an agent loop busy.

:func:`memory_writer` is what :func:`stratamem.testing.drills.crash_drill`
kills: it works through :class:`~stratamem.Memory` with :func:`drill_config`
(segments of 4 turns, so seals, consolidations, tier moves and archive writes
happen every few turns) and runs an agent loop whose
:class:`~stratamem.agentloop.Compactor` stores its messages as turns and
compacts them every few steps. :func:`resume` is the parent's check that a
reopened memory takes new turns and the pyramid carries on.

Every turn starts with its drill key (``<worker>-<n>``), so
:func:`stratamem.testing.drills.check` can count it.
"""

from __future__ import annotations

import json
import os
import random
import traceback
from typing import Any

from ..agentloop import Compactor
from ..config import Config
from ..llm import OpenAIChat
from ..memory import Memory
from ..records import Turn
from ..store.open import open_store

__all__ = ["drill_config", "memory_writer", "resume"]

_FACTS = (
    "The budget for {thing} is ${n}K.",
    "We decided to host {thing} in region eu-{n}.",
    "Maria prefers {thing} reports on day {n} of the sprint.",
    "The deadline for {thing} moved to week {n}.",
    "Ticket {n} tracks the {thing} outage.",
    "Use port {n}000 for the {thing} service.",
)
_THINGS = ("billing", "search", "the mobile app", "onboarding", "analytics", "the data pipeline", "payments")


def drill_config() -> Config:
    """Settings that make the pyramid and compaction busy: every few turns a seal, consolidation or compaction.

    Segments of 4 turns, mini consolidations of 12 and macro of 36, one hot
    segment, warm only for the newest 12 turns (so segments go cold and into
    the archive every 4 turns), and compaction past 600 tokens keeping 150
    recent ones.
    """
    return Config().replace(
        pyramid={
            "micro_chunk_size": 4,
            "mini_chunk_size": 12,
            "macro_chunk_size": 36,
            "hot_chunks": 1,
            "hot_max_tokens": 2_000,
            "warm_max_turns": 12,
        },
        compaction={"threshold": 600, "keep_recent_tokens": 150, "output_reserve": 100, "checkpoint_max_tokens": 250},
    )


def _sentence(rng: random.Random) -> str:
    return rng.choice(_FACTS).format(thing=rng.choice(_THINGS), n=rng.randint(1, 99))


def _agent_step(worker: str, start: int, rng: random.Random) -> list[dict[str, Any]]:
    """One agent-loop step as OpenAI messages; each starts with its drill key. Some steps call a tool."""
    keys = [f"{worker}-{start + i}" for i in range(4)]
    user = {"role": "user", "content": f"{keys[0]} {_sentence(rng)} {_sentence(rng)} What next?"}
    if rng.random() < 0.5:
        return [user, {"role": "assistant", "content": f"{keys[1]} Noted. {_sentence(rng)}"}]
    call_id = f"call_{keys[1].replace('-', '_')}"
    path = f"src/{rng.choice(_THINGS).replace(' ', '_')}.py"
    return [
        user,
        {
            "role": "assistant",
            "content": f"{keys[1]} Reading the file.",
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": json.dumps({"path": path})},
                }
            ],
        },
        {"role": "tool", "tool_call_id": call_id, "content": f"{keys[2]} " + "x = 1\n" * rng.randint(5, 60)},
        {"role": "assistant", "content": f"{keys[3]} Done. {_sentence(rng)}"},
    ]


def memory_writer(
    target: str,
    namespace: str,
    worker: str,
    ack_path: str,
    *,
    llm_url: str,
    seed: int = 0,
    max_batch: int = 6,
    agent_share: float = 0.5,
) -> None:
    """Add turns through :class:`~stratamem.Memory` and run a compacting agent loop, forever.

    Runs in a child process until killed. Each round either adds 1 to
    ``max_batch`` turns to session ``main`` or ``side`` (the pyramid runs
    inside ``add``), or appends one agent step to a live message list that
    a :class:`~stratamem.agentloop.Compactor` (session ``agent``, checkpoints
    from the model at ``llm_url``) stores and compacts. Keys are
    acknowledged after the call returned; ``~phase`` lines say what the child
    was doing (``add``, ``agent``, ``derive`` once a seal, consolidation or
    tier move committed, ``checkpoint`` while compacting). Errors are
    recorded as ``!`` lines and end the child with exit status 1.
    """
    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def phase(name: str) -> None:
        os.write(fd, f"~{name}\n".encode())

    try:
        mem = Memory(open_store(target), namespace=namespace, config=drill_config())
        for kind in ("segment.sealed", "node.consolidated", "tier.changed"):
            mem.events.subscribe(kind, lambda e: phase("derive"))
        mem.events.subscribe("compaction.before", lambda e: phase("checkpoint"))
        model = OpenAIChat("drill-summarizer", base_url=llm_url, api_key="drill", max_retries=0, timeout_s=10)
        compactor = Compactor(model, provider="openai", memory=mem, session="agent")
        messages = compactor.resume_messages()
        n = 0
        while True:
            if rng.random() < agent_share:
                step = _agent_step(worker, n, rng)
                phase("agent")
                messages.extend(step)
                compactor.prepare_messages(messages)
                keys = [str(m["content"]).split(maxsplit=1)[0] for m in step]
            else:
                count = rng.randint(1, max_batch)
                keys = [f"{worker}-{n + i}" for i in range(count)]
                turns = [
                    Turn(
                        role="user" if (n + i) % 2 == 0 else "assistant",
                        content=f"{k} {_sentence(rng)}",
                        metadata={"drill": k},
                    )
                    for i, k in enumerate(keys)
                ]
                phase("add")
                mem.add(turns, session=rng.choice(("main", "side")))
            # Acknowledge only after the call returned: the memory has promised these.
            os.write(fd, "".join(f"{k}\n" for k in keys).encode())
            n += len(keys)
    except BaseException as exc:  # noqa: BLE001 - the parent reads and asserts on this line
        os.write(fd, f"!{type(exc).__name__}: {exc}\n".encode())
        traceback.print_exc()
        os._exit(1)
    finally:
        os.close(fd)


def resume(target: str, namespace: str, trial: int) -> tuple[list[str], list[str]]:
    """Reopen the memory, add a turn to each drill session, check everything carried on; returns (keys, problems).

    A kill between a commit of turns and the pyramid's update leaves that
    session's turns unsealed until its next ``add``: that add must seal them.
    The agent session's turn goes through a new :class:`Compactor`, whose
    saved state must then count exactly the session's stored turns, however
    many earlier kills fell between a store and a state save.
    """
    problems: list[str] = []
    keys: list[str] = []
    mem = Memory(open_store(target), namespace=namespace, config=drill_config())
    try:
        size = mem.config.pyramid.micro_chunk_size
        for session in ("main", "side", "agent"):
            key = f"r{trial}-{session}"
            keys.append(key)
            if session == "agent":
                compactor = Compactor(None, provider="openai", memory=mem, session=session)
                compactor.sync([{"role": "user", "content": f"{key} resuming"}])
                stored = len(mem.turns(session))
                if compactor.state.turn_count != stored:
                    problems.append(
                        f"resume: the agent loop's state counts {compactor.state.turn_count} "
                        f"messages; the session stores {stored}"
                    )
            else:
                mem.add(Turn(role="user", content=f"{key} resuming", metadata={"drill": key}), session=session)
            open_turns = len(mem.pyramid.open_turns(session))
            if open_turns >= size:
                problems.append(f"resume: {open_turns} turns of {session!r} left unsealed (segments of {size})")
        # With deferred summaries only hot segments may wait; the updates summarized everything else.
        waiting = [
            n.id
            for n in mem.pyramid.nodes()
            if n.summary_status == "pending" and not (n.level == 1 and n.tier == "hot")
        ]
        if waiting:
            problems.append(f"resume: nodes {waiting[:5]} still wait for a summary")
    finally:
        mem.close()
    return keys, problems
