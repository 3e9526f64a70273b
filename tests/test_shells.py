"""One context from every shell: library, CLI, MCP over stdio and the HTTP API give the same bytes.

Also: the window's ``short_buffer_turns``, the OpenAI Responses rendering (it
reads back as the same turns) and counting the budget in a provider's tokens.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from webserver import Server

from stratamem import BudgetError, Config, Memory, ValidationError
from stratamem.ingest.responses import read_responses
from stratamem.providers import to_openai, to_responses
from stratamem.records import TextBlock, ToolResultBlock, ToolUseBlock, Turn
from stratamem.tokens import PROVIDER_FACTORS, Calibration, get_tokenizer

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))
NOW = "2026-03-01T12:00:00"
NO_EMBED = Config().replace(embedding={"provider": "none"})


def _project(root: Path, db: Path) -> Path:
    """A project with both instruction files and a working state, and a small conversation."""
    project = root / "proj"
    project.mkdir()
    (project / "STRATAMEM.md").write_text("Always answer in metric units.\n", encoding="utf-8")
    (project / "STRATAMEM.local.md").write_text("My name is Ana; call me Ana.\n", encoding="utf-8")
    with Memory(db, namespace="trip", config=NO_EMBED, embedder=None) as mem:
        ws = mem.state(project)
        ws.set_goal("Plan the Lisbon trip within 900 euros")
        ws.add_task("Book the hotel near the river", id="t1")
        t0 = datetime(2026, 2, 1, 9, 0, tzinfo=UTC)
        for i in range(8):
            mem.add(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Message {i}: the Lisbon hotel by the river costs {100 + i} euros a night.",
                },
                session="old",
                timestamp=t0 + timedelta(minutes=i),
            )
        for i in range(6):
            mem.add(
                {
                    "role": "user" if i % 2 == 0 else "assistant",
                    "content": f"Now {i}: which tram goes to Belem? Tram {15 + i}.",
                },
                session="now",
                timestamp=t0 + timedelta(days=10, minutes=i),
            )
    return project


def _without_time(d: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in d.items() if k != "timestamp"}


def _env(db: Path) -> dict[str, str]:
    return {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": "trip",
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        # A checkout run with PYTHONPATH=src serves its own code, not the installed one.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }


def _cli(db: Path, *args: str) -> str:
    out = subprocess.run([STRATAMEM, "context", *args], env=_env(db), capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return out.stdout


def _mcp(db: Path, project: Path, calls: list[dict[str, Any]]) -> list[str]:
    params = StdioServerParameters(command=STRATAMEM, args=["mcp", "--project", str(project)], env=_env(db))

    async def main() -> list[str]:
        async with Client(params, read_timeout_seconds=60) as client:
            out = []
            for args in calls:
                result = await client.call_tool("get_context", args)
                assert result.is_error is False, result.content[0].text
                out.append(result.content[0].text)
            return out

    return anyio.run(main)


CASES = [  # (format, provider, policy)
    ("text", None, None),
    ("responses", None, "hybrid"),
    ("anthropic", None, "state_first"),
    ("openai", "anthropic", "recall"),
]


def test_library_cli_mcp_and_http_give_the_same_prompt_and_manifest(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    project = _project(tmp_path, db)
    query, budget = "How much is the hotel by the river?", 3000
    when = datetime.fromisoformat(NOW)
    with Memory(db, namespace="trip", config=NO_EMBED, embedder=None) as mem:
        lib = [
            mem.context(
                query,
                budget=budget,
                session="now",
                format=fmt,
                policy=pol,
                now=when,
                provider=prov,
                project_dir=project,
            )
            for fmt, prov, pol in CASES
        ]
    # What the test is about: the project's files and state are in every one of them.
    for ctx in lib:
        ids = [i.id for i in ctx.manifest.items]
        assert ids[:3] == ["instructions:STRATAMEM.md", "instructions:STRATAMEM.local.md", "state"], ids
        assert "metric units" in ctx.text and "call me Ana" in ctx.text and "Lisbon trip within 900" in ctx.text
    assert lib[3].manifest.counting == {
        "counter": "o200k_base",
        "factor": PROVIDER_FACTORS["anthropic"],
        "provider": "anthropic",
        "model": None,
        "source": "measured ratio",
    }

    # CLI: plain text is the prompt's bytes; --json is the context's one JSON form.
    assert _cli(db, query, "-b", str(budget), "-s", "now", "--now", NOW, "-C", str(project)) == lib[0].text + "\n"
    for ctx, (fmt, prov, pol) in zip(lib, CASES, strict=True):
        args = [query, "-b", str(budget), "-s", "now", "--now", NOW, "-C", str(project), "--format", fmt, "--json"]
        args += ["--provider", prov] if prov else []
        args += ["--policy", pol] if pol else []
        got = json.loads(_cli(db, *args))
        want = ctx.to_dict()
        assert _without_time(got.pop("manifest")) == _without_time(want.pop("manifest"))
        assert got == want

    # HTTP: POST and GET, against a real uvicorn server on 127.0.0.1.
    server = Server(db, namespace="trip", project_dir=project, config=NO_EMBED)
    try:
        with server.client() as http:
            for ctx, (fmt, prov, pol) in zip(lib, CASES, strict=True):
                body = {
                    "query": query,
                    "budget": budget,
                    "session": "now",
                    "format": fmt,
                    "now": NOW,
                    "provider": prov,
                    "policy": pol,
                }
                posted = http.post("/api/v1/namespaces/trip/context", json=body)
                fetched = http.get(
                    "/api/v1/namespaces/trip/context", params={k: v for k, v in body.items() if v is not None}
                )
                for r in (posted, fetched):
                    assert r.status_code == 200, r.text
                    got, want = r.json(), ctx.to_dict()
                    assert _without_time(got.pop("manifest")) == _without_time(want.pop("manifest"))
                    assert got == want
                    assert r.json()["text"].encode() == ctx.text.encode()
    finally:
        server.stop()

    # MCP over stdio: the result holds the same prompt and, with explain, the same manifest.
    calls = [
        {
            "query": query,
            "budget": budget,
            "session": "now",
            "format": fmt,
            "now": NOW,
            "explain": True,
            **({"provider": prov} if prov else {}),
            **({"policy": pol} if pol else {}),
        }
        for fmt, prov, pol in CASES
    ]
    results = _mcp(db, project, calls)
    text, manifest_json = results[0].split("\n\n[manifest json] ")
    assert text.startswith(lib[0].text + "\n\n[manifest] ")
    assert _without_time(json.loads(manifest_json)) == _without_time(lib[0].manifest.to_dict())
    for ctx, raw in zip(lib[1:], results[1:], strict=True):
        got = json.loads(raw)
        assert got["messages"] == [dict(m) for m in ctx.messages]
        assert got.get("system") == ctx.system
        assert _without_time(got["manifest_full"]) == _without_time(ctx.manifest.to_dict())


def test_without_a_project_no_shell_adds_instructions(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    _project(tmp_path, db)
    out = _cli(db, "-s", "now", "--now", NOW, "--json")
    assert [i["id"] for i in json.loads(out)["manifest"]["items"] if i["kind"] != "turn"] == []


# --- short_buffer_turns ----------------------------------------------------------------------


def test_short_buffer_turns_caps_the_window(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    with Memory(db, config=NO_EMBED, embedder=None) as mem:
        mem.add(
            [{"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i}"} for i in range(121)], session="s"
        )
    sizes = {}
    for n in (5, 20, 80):
        with Memory(db, config=NO_EMBED.replace(context={"short_buffer_turns": n}), embedder=None) as mem:
            ctx = mem.context(budget=20_000, session="s", format="openai")
            sizes[n] = sum(1 for i in ctx.manifest.items if i.reason == "recent_window")
    # 5 turns from the newest (a user turn) back: the start snaps to a user turn, so 5; likewise 79 of 80.
    assert sizes == {5: 5, 20: 19, 80: 79}


# --- format="responses" --------------------------------------------------------------------

_words = st.text(alphabet="abcdefghij klmnop", min_size=1, max_size=30).filter(lambda s: s.strip() == s and s)


@st.composite
def _conversations(draw: Any) -> list[Turn]:
    """User turns, assistant replies with text and/or tool calls, and the calls' results."""
    turns: list[Turn] = []
    n = 0
    for _ in range(draw(st.integers(1, 5))):
        turns.append(Turn("user", draw(_words)))
        calls = draw(st.integers(0, 2))
        text = draw(st.one_of(st.none(), _words)) if calls else draw(_words)
        blocks: list[Any] = [TextBlock(text)] if text is not None else []
        ids = []
        for _ in range(calls):
            n += 1
            ids.append(f"call_{n}")
            blocks.append(
                ToolUseBlock(
                    f"call_{n}",
                    draw(st.sampled_from(["grep", "read"])),
                    {"q": draw(_words), "n": draw(st.integers(0, 9))},
                )
            )
        turns.append(Turn("assistant", tuple(blocks) if calls else text))
        turns += [Turn("tool", (ToolResultBlock(i, (TextBlock(draw(_words)),)),)) for i in ids]
    return turns


def _shape(t: Turn) -> tuple[str, tuple[Any, ...]]:
    return t.role, t.blocks


@settings(max_examples=80, deadline=None)
@given(turns=_conversations())
def test_responses_items_read_back_as_the_same_turns(turns: list[Turn]) -> None:
    items = to_responses(to_openai(turns))
    back = read_responses([(None, it) for it in items], "s", datetime(2026, 1, 1, tzinfo=UTC)).turns
    assert [_shape(t) for t in back] == [_shape(t) for t in turns]
    for it in items:
        if it["type"] == "message":
            kinds = {p["type"] for p in it["content"]}
            assert kinds == ({"output_text"} if it["role"] == "assistant" else {"input_text"})


def test_a_responses_context_is_the_openai_context_reshaped(tmp_path: Path) -> None:
    with Memory(tmp_path / "m.db", config=NO_EMBED, embedder=None) as mem:
        mem.add(
            [
                {"role": "user", "content": "find the config"},
                {
                    "role": "assistant",
                    "content": "looking",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "grep", "arguments": '{"q": "cfg"}'}}
                    ],
                },
                {"role": "tool", "tool_call_id": "c1", "content": "config.yaml"},
                {"role": "assistant", "content": "it is config.yaml"},
            ],
            session="s",
            format="openai",
        )
        openai = mem.context(budget=500, session="s", format="openai")
        resp = mem.context(budget=500, session="s", format="responses")
        stored = [_shape(st.turn) for st in mem.turns("s")]
    assert resp.format == "responses" and resp.tokens == openai.tokens
    assert list(resp.messages) == [
        {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "find the config"}]},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "looking"}]},
        {"type": "function_call", "call_id": "c1", "name": "grep", "arguments": '{"q": "cfg"}'},
        {"type": "function_call_output", "call_id": "c1", "output": "config.yaml"},
        {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "it is config.yaml"}]},
    ]
    back = read_responses([(None, it) for it in resp.messages], "s", datetime(2026, 1, 1, tzinfo=UTC))
    assert [_shape(t) for t in back.turns] == stored


# --- counting in the provider's tokens ------------------------------------------------------


@pytest.fixture(scope="module")
def long_memory(tmp_path_factory: pytest.TempPathFactory) -> Memory:
    mem = Memory(tmp_path_factory.mktemp("count") / "m.db", config=NO_EMBED, embedder=None)
    mem.add(
        [
            {"role": "user" if i % 2 == 0 else "assistant", "content": f"step {i}: " + "word " * (i % 13)}
            for i in range(200)
        ],
        session="s",
    )
    return mem


def test_anthropic_budgets_are_counted_in_anthropic_tokens(long_memory: Memory) -> None:
    ctx = long_memory.context(budget=1000, session="s", format="anthropic")
    m = ctx.manifest
    assert m.counting == {
        "counter": "o200k_base",
        "factor": 1.07,
        "provider": "anthropic",
        "model": None,
        "source": "measured ratio",
    }
    # 1000 Anthropic tokens hold floor(1000 / 1.07) = 934 o200k tokens.
    o200k = long_memory.context(budget=934, session="s", format="anthropic", provider="openai")
    assert o200k.manifest.budget == 934 and o200k.manifest.total_tokens <= 934
    assert m.items == o200k.manifest.items
    assert m.budget == 1000 and m.total_tokens == math.ceil(o200k.manifest.total_tokens * 1.07) <= 1000
    assert math.ceil(935 * 1.07) > 1000  # 935 would not fit: 934 is the most


def test_openai_counting_is_exact_and_text_has_no_provider(long_memory: Memory) -> None:
    tok = get_tokenizer("o200k_base")
    text = long_memory.context(budget=700, session="s", format="text")
    assert text.manifest.counting == {
        "counter": "o200k_base",
        "factor": 1.0,
        "provider": None,
        "model": None,
        "source": "exact",
    }
    assert text.tokens == tok.count(text.text) <= 700
    openai = long_memory.context(budget=700, session="s", format="openai", model="gpt-4.1")
    assert openai.manifest.counting == {
        "counter": "o200k_base",
        "factor": 1.0,
        "provider": "openai",
        "model": "gpt-4.1",
        "source": "exact",
    }


def test_a_factor_learned_from_usage_replaces_the_measured_ratio(long_memory: Memory) -> None:
    cal = Calibration(alpha=1.0)
    cal.observe("claude-x", 1000, 1250)  # the provider reported 1,250 input tokens for our 1,000
    ctx = long_memory.context(budget=1000, session="s", format="anthropic", model="claude-x", calibration=cal)
    assert ctx.manifest.counting == {
        "counter": "o200k_base",
        "factor": 1.25,
        "provider": "anthropic",
        "model": "claude-x",
        "source": "usage",
    }
    same = long_memory.context(budget=800, session="s", format="anthropic", provider="openai")  # 1000 / 1.25
    assert ctx.manifest.items == same.manifest.items
    assert ctx.tokens == math.ceil(same.tokens * 1.25) <= 1000
    # A model the calibration has not seen keeps the provider's measured ratio.
    other = long_memory.context(budget=1000, session="s", format="anthropic", model="claude-y", calibration=cal)
    assert other.manifest.counting["factor"] == 1.07 and other.manifest.counting["source"] == "measured ratio"


def test_bad_counting_inputs_are_refused(long_memory: Memory) -> None:
    with pytest.raises(ValidationError, match="unknown provider 'gemini'"):
        long_memory.context(budget=500, session="s", provider="gemini")
    with pytest.raises(ValidationError, match="model must be a string"):
        long_memory.context(budget=500, session="s", model=4)  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="unknown format 'responses-v2'"):
        long_memory.context(budget=500, session="s", format="responses-v2")
    # 3 Anthropic tokens are 2 o200k tokens: below the 3-token request overhead.
    with pytest.raises(BudgetError):
        long_memory.context(budget=3, session="s", format="anthropic")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    budget=st.integers(min_value=4, max_value=4000),
    fmt=st.sampled_from(["openai", "responses", "anthropic"]),
    provider=st.sampled_from([None, "openai", "anthropic"]),
)
def test_the_budget_holds_in_the_providers_counting(
    long_memory: Memory, budget: int, fmt: str, provider: str | None
) -> None:
    ctx = long_memory.context(budget=budget, session="s", format=fmt, provider=provider)
    factor = ctx.manifest.counting["factor"]
    assert ctx.tokens <= budget
    assert factor == PROVIDER_FACTORS[provider or ("anthropic" if fmt == "anthropic" else "openai")]
