"""wrap(client) with a memory whose config has ``context.cache_layout`` on (issue 26): each wrapped call
sends the caller's system prompt and ``memory.context(..., cache=True)`` instead of the live list.
Real openai/anthropic clients against FakeLLMServer; a real SQLite store."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import anthropic
import openai
from wire import marked

import stratamem
from stratamem import Memory
from stratamem.config import Config
from stratamem.providers import structural_problems
from stratamem.testing import FakeLLMServer, FakePromptCache

OUTPUT = "".join(f"line {i:04d} of the test run output\n" for i in range(300))  # ~3,000 tokens
SYSTEM = "You are a careful coding agent."
ASK = "Run the tests and tell me what fails."
STEPS = 8


RULES = "Project rules: " + " ".join(f"rule {i} keep the build green." for i in range(400))  # > 1,024 tokens


def _memory(path: Path, layout: bool) -> Memory:
    config = Config.from_dict({"pyramid": {"enabled": False}, "context": {"cache_layout": layout}})
    return Memory(path, namespace="agent", config=config, embedder=None)


def _with_rules(path: Path) -> Memory:
    """A layout memory whose session ``s`` holds a stored system prompt over 1,024 tokens (a cacheable L0)."""
    mem = _memory(path, layout=True)
    mem.add([{"role": "system", "content": RULES}], session="s", format="openai")
    return mem


def _wrapped_anthropic(server: FakeLLMServer, memory: Memory | None) -> Any:
    return stratamem.wrap(
        anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="ak-test", max_retries=0),
        memory=memory,
        session="s",
    )


def _openai_loop(server: FakeLLMServer, memory: Memory | None) -> list[dict[str, Any]]:
    client = stratamem.wrap(
        openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0), memory=memory, session="s"
    )
    history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]
    for k in range(STEPS):
        server.script_tool_call("bash", {"cmd": f"pytest -k case{k}"})
        msg = client.chat.completions.create(model="gpt-4.1", messages=history).choices[0].message
        assert msg.tool_calls is not None
        calls = [tc.model_dump() for tc in msg.tool_calls]
        history.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
        history.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": OUTPUT})
    return [dict(r.body) for r in server.requests]


def _anthropic_loop(server: FakeLLMServer, memory: Memory | None) -> list[dict[str, Any]]:
    client = _wrapped_anthropic(server, memory)
    history: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
    for k in range(STEPS):
        server.script_tool_call("bash", {"cmd": f"pytest -k case{k}"})
        resp = client.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=SYSTEM, messages=history)
        history.append({"role": "assistant", "content": resp.content})
        result = {"type": "tool_result", "tool_use_id": resp.content[0].id, "content": OUTPUT}
        history.append({"role": "user", "content": [result]})
    return [dict(r.body) for r in server.requests]


def _unmarked(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The messages without cache_control (a rolling breakpoint moves; the bytes around it do not)."""
    out = []
    for m in messages:
        content = m["content"]
        if isinstance(content, list):
            content = [{k: v for k, v in b.items() if k != "cache_control"} for b in content]
        out.append({**m, "content": content})
    return out


def _open_prefix(messages: list[dict[str, Any]]) -> str:
    """The messages' JSON without its closing bracket: what a request that only appends starts with."""
    return json.dumps(messages)[:-1]


def test_openai_tool_loop_sends_the_cache_layout_and_each_step_extends_the_last(db_path: Path) -> None:
    mem = _memory(db_path, layout=True)
    with FakeLLMServer(reply="Done.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        bodies = _openai_loop(server, mem)
        usages = [server.cached(r) for r in server.requests]
    messages = [b["messages"] for b in bodies]
    assert [len(m) for m in messages] == [2 + 2 * k for k in range(STEPS)]
    for m in messages:
        assert structural_problems(m, "openai") == []
        # The context's stable system message (L0) quotes the caller's stored system prompt, so the
        # caller's own copy is not sent a second time: the words go once.
        assert m[0]["role"] == "system" and m[0]["content"].startswith("## System prompt\n" + SYSTEM)
        assert json.dumps(m).count(json.dumps(SYSTEM)[1:-1]) == 1
        assert m[1] == {"role": "user", "content": ASK}
    # Step k+1's request starts with the bytes of step k's whole request: only the new step is appended.
    for before, after in zip(messages, messages[1:], strict=False):
        assert json.dumps(after).startswith(_open_prefix(before))
        assert after[len(before) :][0]["role"] == "assistant" and after[len(before) :][1]["role"] == "tool"
    # The provider read the previous request back; the usage is recorded on the context's manifest.
    assert [u[0] > 0 for u in usages] == [False, False] + [True] * (STEPS - 2)
    assert usages[-1][0] > usages[-2][0]
    reported = mem.store.manifests.latest("agent", limit=1)[0].data["cache"]["reported"]
    assert reported["cached_read"] == usages[-1][0]
    assert reported["source"] == "openai-chat"
    mem.close()


def test_anthropic_tool_loop_marks_the_window_and_each_step_extends_the_last(db_path: Path) -> None:
    mem = _memory(db_path, layout=True)
    with FakeLLMServer(reply="Done.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        bodies = _anthropic_loop(server, mem)
        usages = [server.cached(r) for r in server.requests]
    for b in bodies:
        assert structural_problems(b["messages"], "anthropic") == []
        assert b["system"] == SYSTEM  # nothing stable in the context's system: the caller's as it came
        assert b["messages"][0] == {"role": "user", "content": ASK}
    # The first request is below the model's minimum cacheable prefix (1,024 tokens): no breakpoint.
    # From then on the rolling breakpoint sits on the window's last block (the newest tool result).
    assert marked(bodies[0]) == []
    assert [marked(b) for b in bodies[1:]] == [[(2 * k, 0)] for k in range(1, STEPS)]
    # Without its breakpoint, step k's request is a byte prefix of step k+1's.
    for before, after in zip(bodies, bodies[1:], strict=False):
        assert json.dumps(_unmarked(after["messages"])).startswith(_open_prefix(_unmarked(before["messages"])))
    # Each step reads what the previous one wrote; the usage lands on the manifest.
    assert usages[0] == (0, 0) and usages[1][0] == 0
    assert all(usages[k][0] == usages[k - 1][0] + usages[k - 1][1] for k in range(2, STEPS))
    reported = mem.store.manifests.latest("agent", limit=1)[0].data["cache"]["reported"]
    assert (reported["cached_read"], reported["cache_written"]) == usages[-1]
    assert reported["source"] == "anthropic"
    mem.close()


def test_with_the_layout_off_the_requests_are_the_live_list_as_before(tmp_path: Path) -> None:
    for loop in (_openai_loop, _anthropic_loop):
        sent = []
        for memory in (_memory(tmp_path / f"{loop.__name__}.db", layout=False), None):
            with FakeLLMServer(reply="Done.") as server:
                sent.append(loop(server, memory))
            if memory is not None:
                assert memory.store.manifests.latest("agent", limit=1) == []
                memory.close()
        assert sent[0] == sent[1]
        assert [len(b["messages"]) for b in sent[0]][-1] == (2 if loop is _openai_loop else 1) + 2 * (STEPS - 1)
        assert "cache_control" not in json.dumps(sent[0])


def test_anthropic_system_is_the_callers_then_the_contexts_stable_blocksmarked(db_path: Path) -> None:
    mem = _with_rules(db_path)
    caller = [{"type": "text", "text": SYSTEM}]
    with FakeLLMServer(reply="Done.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        client = _wrapped_anthropic(server, mem)
        history: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        for k in range(4):
            server.script_tool_call("bash", {"cmd": f"pytest -k case{k}"})
            resp = client.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=caller, messages=history)
            history.append({"role": "assistant", "content": resp.content})
            result = {"type": "tool_result", "tool_use_id": resp.content[0].id, "content": OUTPUT}
            history.append({"role": "user", "content": [result]})
        bodies = [dict(r.body) for r in server.requests]
        usages = [server.cached(r) for r in server.requests]
    stable = {"type": "text", "text": "## System prompt\n" + RULES, "cache_control": {"type": "ephemeral"}}
    for k, b in enumerate(bodies):
        # The caller's block first and unchanged, then the context's L0 with its breakpoint: byte-identical.
        assert b["system"] == caller + [stable]
        assert marked(b) == [(2 * k, 0)]
        assert structural_problems(b["messages"], "anthropic") == []
    # The first call writes the system prefix; every later one reads all the previous call wrote.
    assert usages[0][0] == 0 and usages[0][1] > 0
    assert all(usages[k][0] == usages[k - 1][0] + usages[k - 1][1] for k in range(1, 4))
    mem.close()


def test_async_openai_client_sends_the_layout_too(db_path: Path) -> None:
    mem = _memory(db_path, layout=True)

    async def run(server: FakeLLMServer) -> None:
        client = stratamem.wrap(
            openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0),
            memory=mem,
            session="s",
        )
        history: list[dict[str, Any]] = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": ASK}]
        for k in range(3):
            server.script_tool_call("bash", {"cmd": f"pytest -k case{k}"})
            resp = await client.chat.completions.create(model="gpt-4.1", messages=history)
            msg = resp.choices[0].message
            assert msg.tool_calls is not None
            calls = [tc.model_dump() for tc in msg.tool_calls]
            history.append({"role": "assistant", "content": msg.content, "tool_calls": calls})
            history.append({"role": "tool", "tool_call_id": calls[0]["id"], "content": OUTPUT})

    with FakeLLMServer(reply="Done.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        asyncio.run(run(server))
        messages = [r.body["messages"] for r in server.requests]
        last_read = server.cached(server.requests[-1])[0]
    assert [m[0]["content"].startswith("## System prompt\n") for m in messages] == [True] * 3
    assert all(json.dumps(b).startswith(_open_prefix(a)) for a, b in zip(messages, messages[1:], strict=False))
    assert mem.store.manifests.latest("agent", limit=1)[0].data["cache"]["reported"]["cached_read"] == last_read > 0
    mem.close()


def test_callers_system_marks_give_way_when_they_would_pass_four(db_path: Path) -> None:
    mem = _with_rules(db_path)
    mark = {"cache_control": {"type": "ephemeral"}}
    few = [{"type": "text", "text": SYSTEM, **mark}]
    many = [{"type": "text", "text": f"{SYSTEM} Part {i}.", **mark} for i in range(3)]
    with FakeLLMServer(reply="Done.", prompt_cache=FakePromptCache(min_tokens=1024)) as server:
        client = _wrapped_anthropic(server, mem)
        history: list[dict[str, Any]] = [{"role": "user", "content": ASK}]
        server.script_tool_call("bash", {"cmd": "pytest"})
        resp = client.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=few, messages=history)
        history += [
            {"role": "assistant", "content": resp.content},
            {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": resp.content[0].id, "content": OUTPUT}],
            },
        ]
        client.messages.create(model="claude-sonnet-4-6", max_tokens=20, system=many, messages=history)
        first, second = (dict(r.body) for r in server.requests)
    # 1 caller mark + the context's 2 (L0, the window's last block): all kept.
    assert [("cache_control" in b) for b in first["system"]] == [True, True]
    assert marked(first) == [(0, 0)]
    # 3 caller marks + the context's 2 would be 5: the caller's go, its text stays first and unchanged.
    assert [b["text"] for b in second["system"][:3]] == [b["text"] for b in many]
    assert [("cache_control" in b) for b in second["system"]] == [False, False, False, True]
    assert marked(second) == [(2, 0)]
    mem.close()
