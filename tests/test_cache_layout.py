"""The cache layout (issue 26) through the official Anthropic and OpenAI clients against FakeLLMServer.

Two calls with one exchange between them: the stable prefix (instructions,
standing state, the summary ledger, the window) is sent byte-identical, the
breakpoints sit on the stable blocks only, what is recalled for the message
comes last, and the fake provider's cache reads back what the first call wrote.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest
from wire import plain

from stratamem import Memory
from stratamem.config import Config
from stratamem.context.cache_render import RECALL_TITLE, STEP_STUB
from stratamem.context.layout import LEDGER_TITLE
from stratamem.providers import structural_problems
from stratamem.testing import FakeLLMServer, FakePromptCache

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
ANIMALS = ["walrus", "heron", "otter", "lynx", "badger", "falcon"]
PLACES = ["harbour", "orchard", "quarry", "lighthouse", "market", "chapel"]
CFG = {
    "pyramid": {"defer_summarization": False, "micro_chunk_size": 6},
    "context": {"cache_min_tokens": 64},
}


def _turn(session: str, i: int) -> dict[str, str]:
    animal, place = ANIMALS[i % 6], PLACES[(i * 5) % 6]
    if i % 2 == 0:
        text = f"In {session} I told you the {animal} near the {place} ate {i + 3} apples before noon."
    else:
        text = f"Noted: the {animal} and the {place}, {i + 3} apples. I will remember the {animal}."
    return {"role": "user" if i % 2 == 0 else "assistant", "content": text}


@pytest.fixture
def mem(db_path: Path) -> Iterator[Memory]:
    m = Memory(db_path, namespace="cache", config=Config.from_dict(CFG), embedder=None)
    for session in ("s1", "s2"):
        for i in range(12):
            m.add(_turn(session, i), session=session)
        m.seal(session)
    yield m
    m.close()


def _marks(body: Mapping[str, Any]) -> list[str]:
    """Where the request carries cache_control: ``system[i]`` or ``messages[i][j]``."""
    out = [f"system[{i}]" for i, b in enumerate(body.get("system") or []) if "cache_control" in b]
    for i, m in enumerate(body["messages"]):
        if isinstance(m["content"], list):
            out += [f"messages[{i}][{j}]" for j, b in enumerate(m["content"]) if "cache_control" in b]
    return out


MESSAGES = [
    "Tell me again about the walrus at the harbour, I liked that story.",
    "Thanks, that helps. And the otter near the quarry was funny too.",
    "Good. Let us plan the next visit to the lighthouse with the falcon.",
]


def _converse(mem: Memory, send: Any, fmt: str) -> list[Any]:
    """Three calls in session s3, each after the user's message, the reply stored between them."""
    contexts = []
    for text in MESSAGES:
        mem.add({"role": "user", "content": text}, session="s3")
        ctx = mem.context(text, budget=3000, session="s3", format=fmt, model="claude-sonnet-4-6", cache=True)
        contexts.append(ctx)
        resp = send(ctx)
        mem.report_usage(resp.usage, session="s3")
        mem.add({"role": "assistant", "content": "Noted."}, session="s3")
    return contexts


def test_anthropic_stable_prefix_is_byte_identical_and_marked_through_the_official_client(mem: Memory) -> None:
    with FakeLLMServer(reply="Noted.", prompt_cache=FakePromptCache(min_tokens=64)) as server:
        client = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="ak-test", max_retries=0)
        usages: list[Any] = []

        def send(ctx: Any) -> Any:
            resp = client.messages.create(
                model="claude-sonnet-4-6", max_tokens=20, system=ctx.system_blocks or ctx.system, messages=ctx.messages
            )
            usages.append(resp.usage)
            return resp

        contexts = _converse(mem, send, "anthropic")
        bodies = [r.body for r in server.requests]
    assert len(bodies) == 3
    for before, after in zip(bodies, bodies[1:], strict=False):
        # L0-L2: the system blocks, unchanged.
        assert plain(after["system"]) == plain(before["system"])
        # L3: the whole request but this call's recall, the user's newest words included, is in the next
        # request as sent.
        newest = before["messages"][-1]
        assert newest["content"][-1]["text"].startswith(RECALL_TITLE)
        held = [*before["messages"][:-1], {**newest, "content": newest["content"][:-1]}]
        assert plain(after["messages"][: len(held)]) == plain(held)
    last = bodies[-1]
    assert [b["text"].split("\n", 1)[0] for b in last["system"]][-1] == LEDGER_TITLE
    # Breakpoints: the stable system blocks and the newest message's words, before the recall; at most 4.
    assert _marks(last) == ["system[0]", f"messages[{len(last['messages']) - 1}][0]"]
    newest = last["messages"][-1]["content"]
    assert newest[0]["text"] == MESSAGES[-1] and newest[-1]["text"].startswith(RECALL_TITLE)
    # The provider read back what the previous call wrote: everything up to its window breakpoint.
    assert usages[0].cache_read_input_tokens == 0
    assert usages[2].cache_read_input_tokens > 0
    assert usages[2].cache_read_input_tokens >= usages[1].cache_read_input_tokens
    # The manifest names the same breakpoints and holds the reported hit rate.
    cache = contexts[-1].manifest.cache
    at = len(last["messages"]) - 1
    assert cache is not None and [b["after"] for b in cache["breakpoints"]] == ["ledger", f"message {at}"]
    assert cache["stable_tokens"] == cache["breakpoints"][-1]["tokens"]
    stored = mem.store.manifests.latest("cache", limit=1)[0].data
    total = usages[2].input_tokens + usages[2].cache_read_input_tokens + usages[2].cache_creation_input_tokens
    assert stored["cache"]["reported"] == {
        "input": total,
        "cached_read": usages[2].cache_read_input_tokens,
        "cache_written": usages[2].cache_creation_input_tokens,
        "hit_rate": round(usages[2].cache_read_input_tokens / total, 4),
        "source": "anthropic",
        "output": usages[2].output_tokens,
    }
    assert stored["cache"]["stable_hash"] == cache["stable_hash"]


def test_openai_stable_prefix_is_first_and_byte_identical_through_the_official_client(mem: Memory) -> None:
    with FakeLLMServer(reply="Noted.", prompt_cache=FakePromptCache(min_tokens=64)) as server:
        client = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
        cached: list[int] = []

        def send(ctx: Any) -> Any:
            resp = client.chat.completions.create(
                model="gpt-4.1", messages=ctx.messages, prompt_cache_key=ctx.cache_key
            )
            cached.append(resp.usage.prompt_tokens_details.cached_tokens)
            return resp

        contexts = _converse(mem, send, "openai")
        bodies = [r.body for r in server.requests]
    for before, after in zip(bodies, bodies[1:], strict=False):
        # Everything but this call's recall (last), the user's newest message included, is the next prefix.
        held = len(before["messages"]) - 1
        assert after["messages"][:held] == before["messages"][:held]
        assert before["messages"][held]["role"] == "system"
        assert before["messages"][held]["content"].startswith(RECALL_TITLE)
    assert bodies[-1]["messages"][-2] == {"role": "user", "content": MESSAGES[-1]}
    assert bodies[-1]["prompt_cache_key"] == contexts[-1].cache_key == contexts[0].cache_key
    assert "cache_control" not in json.dumps(bodies)
    assert cached[0] == 0 and cached[2] > 0 and cached[2] % 128 == 0


def test_a_prefix_below_the_model_minimum_gets_no_breakpoint_and_says_so(mem: Memory) -> None:
    mem.add({"role": "user", "content": MESSAGES[0]}, session="s3")
    ctx = mem.context(MESSAGES[0], budget=3000, session="s3", format="anthropic", model="claude-opus-4-6", cache=True)
    cache = ctx.manifest.cache
    assert cache is not None
    # Opus 4.6 caches from 4,096 tokens (the configured 64 overrides only when set: here it is).
    assert cache["min_tokens"] == 64
    off = Memory(mem.store, namespace="cache", config=Config.from_dict({**CFG, "context": {}}), embedder=None)
    ctx = off.context(MESSAGES[0], budget=3000, session="s3", format="anthropic", model="claude-opus-4-6", cache=True)
    cache = ctx.manifest.cache
    assert cache is not None and cache["min_tokens"] == 4096
    assert cache["breakpoints"] == [] and cache["cacheable"] is False
    assert not _marks({"system": list(ctx.system_blocks or ()), "messages": list(ctx.messages)})
    assert any("below the model's minimum of 4096" in n for n in ctx.manifest.notes)


def test_the_switch_off_gives_todays_context(mem: Memory) -> None:
    mem.add({"role": "user", "content": MESSAGES[0]}, session="s3")
    for fmt in ("openai", "anthropic", "responses", "text"):
        default = mem.context(MESSAGES[0], budget=2000, session="s3", format=fmt)
        off = mem.context(MESSAGES[0], budget=2000, session="s3", format=fmt, cache=False)
        a, b = default.to_dict(), off.to_dict()
        for d in (a, b):
            d["manifest"].pop("timestamp")
        assert a == b
        assert default.system_blocks is None and default.cache_key is None and default.manifest.cache is None
        assert not {"system_blocks", "cache_key"} & set(a) and "cache" not in a["manifest"]


def test_a_question_is_selected_as_without_the_layout(mem: Memory) -> None:
    mem.add({"role": "user", "content": "How many apples did the walrus eat?"}, session="s3")
    q = "How many apples did the walrus eat?"
    on = mem.context(q, budget=1500, session="s3", format="text", cache=True)
    off = mem.context(q, budget=1500, session="s3", format="text")
    assert on.manifest.cache is not None and on.manifest.cache["deviation"] is not None
    # The same units for the same reasons (laid out differently: the window before what is recalled).
    assert sorted((i.id, i.reason, i.tokens) for i in on.manifest.items) == sorted(
        (i.id, i.reason, i.tokens) for i in off.manifest.items
    )


def test_a_fresh_process_gives_a_warm_memory_the_same_cache_layout(mem: Memory, db_path: Path) -> None:
    """No hidden per-process state: the CLI in a new process assembles what a memory that has served
    several calls (its summary index warm) assembles."""
    for text in MESSAGES:
        mem.add({"role": "user", "content": text}, session="s3")
        mem.context(text, budget=3000, session="s3", format="anthropic", cache=True)
        mem.add({"role": "assistant", "content": "Noted."}, session="s3")
    mem.add({"role": "user", "content": "And the badger at the chapel."}, session="s3")
    warm = mem.context("And the badger at the chapel.", budget=3000, session="s3", format="anthropic", cache=True)
    config = db_path.parent / "stratamem.yaml"
    config.write_text(json.dumps({**CFG, "context": {**CFG["context"], "cache_layout": True}}), encoding="utf-8")
    env = {
        "STRATAMEM_DB": str(db_path),
        "STRATAMEM_NAMESPACE": "cache",
        "STRATAMEM_EMBEDDING": "none",
        "STRATAMEM_CONFIG": str(config),
        "PATH": os.environ.get("PATH", ""),
        # This tree's code, not another install's (an empty PYTHONPATH changes nothing).
        "PYTHONPATH": os.environ.get("PYTHONPATH", ""),
    }
    args = ["And the badger at the chapel.", "-b", "3000", "-s", "s3", "--format", "anthropic", "--json"]
    out = subprocess.run([STRATAMEM, "context", *args], env=env, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    got, want = json.loads(out.stdout), warm.to_dict()
    for d in (got, want):
        d["manifest"].pop("timestamp")
    assert got == want
    assert got["manifest"]["cache"]["layers"]["ledger"] > 0 and got["system_blocks"]


def _step(n: int, output: str) -> list[dict[str, Any]]:
    """One tool step in the Anthropic shape: the model's call, then its result."""
    call = {"type": "tool_use", "id": f"toolu_{n:03d}", "name": "bash", "input": {"command": f"pytest -q -k case{n}"}}
    result = {"type": "tool_result", "tool_use_id": f"toolu_{n:03d}", "content": output}
    return [
        {"role": "assistant", "content": [{"type": "text", "text": f"Step {n}: run the tests."}, call]},
        {"role": "user", "content": [result]},
    ]


BIG = "\n".join(f"tests/test_case{i}.py::test_walrus_{i} FAILED harbour mismatch {i * 7}" for i in range(160))
SMALL = "1 passed in 0.12s"
OUTPUTS = [BIG, SMALL, SMALL, BIG, SMALL, SMALL, SMALL]
"""A tool loop whose large steps do not fit the window's room at B 1,500 (about 800 tokens) and
whose small ones do: the window must show the small ones, newest included."""


def _result_text(body: Mapping[str, Any], fmt: str, tool_id: str) -> str:
    """The text of the tool result answering ``tool_id`` in a request."""
    if fmt == "openai":
        return next(m["content"] for m in body["messages"] if m.get("tool_call_id") == tool_id)
    block = next(
        b
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("tool_use_id") == tool_id
    )
    content = block["content"]
    return content if isinstance(content, str) else "".join(c["text"] for c in content if c["type"] == "text")


def _tool_ids(body: Mapping[str, Any], fmt: str) -> list[str]:
    """Ids of the tool results a request carries, in order."""
    if fmt == "openai":
        return [m["tool_call_id"] for m in body["messages"] if m["role"] == "tool"]
    return [
        b["tool_use_id"]
        for m in body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]


@pytest.mark.parametrize("fmt", ["openai", "anthropic"])
def test_a_tool_loop_window_opens_at_a_tool_step_and_keeps_its_prefix_through_the_official_client(
    db_path: Path, fmt: str
) -> None:
    # Chunks of 24 turns: the loop's turns are not summarized during it, so the ledger holds still.
    # A cut share of a quarter of the room: the seven steps, the large ones cut, fit one anchored window.
    cfg = Config.from_dict(
        {
            **CFG,
            "pyramid": {**CFG["pyramid"], "micro_chunk_size": 24},
            "context": {**CFG["context"], "cache_cut_share": 0.25},
        }
    )
    mem = Memory(db_path, namespace="cache", config=cfg, embedder=None)
    for session in ("s1", "s2"):
        for i in range(12):
            mem.add(_turn(session, i), session=session)
        mem.seal(session)
    mem.add({"role": "user", "content": "Run the test suite and fix the failures in the harbour module."}, session="s3")
    contexts = []
    with FakeLLMServer(reply="Noted.", prompt_cache=FakePromptCache(min_tokens=64)) as server:
        if fmt == "openai":
            oa = openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)
        else:
            an = anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="ak-test", max_retries=0)
        for n, output in enumerate([None, *OUTPUTS]):
            if output is not None:
                for m in _step(n, output):
                    mem.add(m, session="s3", format="anthropic")
            ctx = mem.context("fix the failures", budget=1500, session="s3", format=fmt, cache=True)
            contexts.append(ctx)
            if fmt == "openai":
                oa.chat.completions.create(model="gpt-4.1", messages=ctx.messages)
            else:
                an.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=ctx.system, messages=ctx.messages)
        bodies = [r.body for r in server.requests]
    assert len(bodies) == len(OUTPUTS) + 1
    for n, (ctx, body) in enumerate(zip(contexts, bodies, strict=True)):
        assert ctx.tokens <= 1500
        # Every call with its results, every result after its call (the official client sent it as is).
        assert structural_problems(body["messages"], fmt) == []
        shown = _tool_ids(body, fmt)
        if n and OUTPUTS[n - 1] is SMALL:
            # The newest step fits, so the model sees it (main's layout showed Anthropic nothing here).
            assert shown and shown[-1] == f"toolu_{n:03d}"
            window = [m for m in body["messages"] if m["role"] != "system"]
            if fmt == "anthropic" and window[0]["role"] == "user" and isinstance(window[0]["content"], str):
                # The window opens at the user's request, or at a tool step behind the fixed stub.
                assert window[0]["content"] in (
                    STEP_STUB,
                    "Run the test suite and fix the failures in the harbour module.",
                )
                assert window[1]["role"] == "assistant"
        if n and OUTPUTS[n - 1] is BIG:
            # A step larger than the window's room is shown with its result cut (head, tail, a marker
            # naming the stored turn): the model sees its newest step, the call with its result.
            assert shown and shown[-1] == f"toolu_{n:03d}"
            text = _result_text(body, fmt, f"toolu_{n:03d}")
            assert len(text) < len(BIG) and text.startswith(BIG[:40]) and text.endswith(BIG[-40:])
            ref = re.search(
                r"kept (\d+) head \+ (\d+) tail of (\d+) characters; all of it is stored as (turn:\d+)", text
            )
            assert ref and int(ref[3]) == len(BIG)
            assert [st.text for st in mem.expand(ref[4])] == [BIG]
    # Every step, cut or whole, stays in the window as it was sent: each request starts with the previous
    # one's window (the large steps no longer empty it), and the anchor holds still.
    for n in range(2, len(bodies)):
        before, after = bodies[n - 1], bodies[n]
        l4 = contexts[n - 1].manifest.cache["layers"]["per_call"] > 0
        if fmt == "openai":
            held = len(before["messages"]) - (1 if l4 else 0)  # L4 is the last system message
            assert after["messages"][:held] == before["messages"][:held]
        else:
            held = len(before["messages"]) - 1  # the newest results may carry this call's recall
            assert after["system"] == before["system"]
            assert plain(after["messages"][:held]) == plain(before["messages"][:held])
            assert after["messages"][0]["content"] == STEP_STUB or after["messages"][0]["role"] == "user"
        assert contexts[n].manifest.cache["anchor"] == contexts[n - 1].manifest.cache["anchor"]
    mem.close()
