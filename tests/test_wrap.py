"""stratamem.wrap(client): the real openai/anthropic client libraries against FakeLLMServer on 127.0.0.1."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

import stratamem
from stratamem import Memory
from stratamem.config import CompactionConfig, Config
from stratamem.errors import ValidationError
from stratamem.testing.llm_server import (
    FRAME_MESSAGE,
    FRAME_REQUEST,
    FRAME_TOOL,
    FakeLLMServer,
    checkpoint_reply,
    request_input_tokens,
)
from stratamem.tokens import count_messages, get_tokenizer

TOK = get_tokenizer("o200k_base")
SMALL = {"threshold": 6_000, "keep_recent_tokens": 1_500, "output_reserve": 500, "checkpoint_max_tokens": 600}


@pytest.fixture(scope="module")
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply="Sure, done.") as s:
        yield s


@pytest.fixture
def mem(db_path: Path) -> Iterator[Memory]:
    m = Memory(
        db_path, namespace="agent", config=Config.from_dict({"pyramid": {"enabled": False}, "compaction": SMALL})
    )
    yield m
    m.close()


def oai(server: FakeLLMServer) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.openai_base_url, api_key="sk-test", max_retries=0)


def ant(server: FakeLLMServer) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=server.anthropic_base_url, api_key="ak-test", max_retries=0)


def stored_texts(mem: Memory, session: str = "s") -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in mem.turns(session)]


# --- the fake server counts like a provider ----------------------------------------------------


def test_fake_server_counts_anthropic_tool_result_blocks_and_tools(server: FakeLLMServer) -> None:
    result = "line of output\n" * 200
    body = {
        "model": "m",
        "max_tokens": 10,
        "system": "Be brief.",
        "messages": [
            {"role": "user", "content": "read it"},
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}}],
            },
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": result}]},
        ],
        "tools": [{"name": "read_file", "input_schema": {"type": "object"}}],
    }
    n = request_input_tokens("anthropic", body, TOK.count)
    expected = (
        FRAME_REQUEST
        + FRAME_MESSAGE
        + TOK.count("Be brief.")
        + FRAME_MESSAGE
        + TOK.count("read it")
        + FRAME_MESSAGE
        + FRAME_TOOL
        + TOK.count("read_file")
        + TOK.count('{"path":"a.py"}')
        + FRAME_MESSAGE
        + FRAME_TOOL
        + TOK.count(result)
        + 12
        + TOK.count('{"name":"read_file","input_schema":{"type":"object"}}')
    )
    assert n == expected
    assert n > TOK.count(result)  # the tool result counts (it used to count as nothing)
    reply = ant(server).messages.create(**body)
    assert reply.usage.input_tokens == expected


# --- non-streaming ---------------------------------------------------------------------------


def test_wrapped_openai_stores_turns_and_calibrates(server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(oai(server), memory=mem, session="s", agent_model="gpt-x")
    history: list[dict[str, Any]] = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Hello there."},
    ]
    resp = client.chat.completions.create(model="gpt-x", messages=history, max_tokens=20)
    assert isinstance(resp, openai.types.chat.ChatCompletion)  # the provider's own object
    assert resp.choices[0].message.content == "Sure, done."
    history.append(resp.choices[0].message)  # an SDK object, as callers often append
    history.append({"role": "user", "content": "And now?"})
    client.chat.completions.create(model="gpt-x", messages=history, max_tokens=20)
    assert stored_texts(mem) == [
        ("system", "Be brief."),
        ("user", "Hello there."),
        ("assistant", "Sure, done."),
        ("user", "And now?"),
        ("assistant", "Sure, done."),
    ]
    state = client.stratamem.compactor.state
    req = server.requests[-1]
    assert state.last_usage["input_tokens"] == server.input_tokens(req)
    estimate = count_messages(req.body["messages"], TOK)
    assert state.last_usage["estimated"] == estimate
    assert client.stratamem.compactor.calibration.factor("gpt-x") >= 1.0
    assert history[-1] == {"role": "user", "content": "And now?"} and len(history) == 4  # caller list untouched


def test_wrapped_anthropic_create_with_system_and_tool_results(server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(ant(server), memory=mem, session="s")
    history: list[dict[str, Any]] = [
        {"role": "user", "content": "Read a.py"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "t1", "name": "read_file", "input": {"path": "a.py"}}],
        },
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "x = 1\n" * 50}]},
    ]
    resp = client.messages.create(model="claude-x", system="Be brief.", messages=history, max_tokens=20)
    assert isinstance(resp, anthropic.types.Message)
    assert server.requests[-1].body["system"] == "Be brief."
    history.append({"role": "assistant", "content": resp.content})  # SDK blocks
    history.append({"role": "user", "content": "Thanks."})
    client.messages.create(model="claude-x", system="Be brief.", messages=history, max_tokens=20)
    roles = [r for r, _ in stored_texts(mem)]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]
    assert client.stratamem.compactor.state.last_usage["input_tokens"] == server.input_tokens(server.requests[-1])


def test_wrapped_client_compacts_a_long_conversation_and_sends_the_managed_list(
    server: FakeLLMServer, mem: Memory
) -> None:
    with FakeLLMServer(reply=checkpoint_reply) as summ:
        summarizer = stratamem.llm.OpenAIChat("s", base_url=summ.openai_base_url, max_retries=0)
        client = stratamem.wrap(ant(server), memory=mem, session="s", summarizer=summarizer)
        history: list[dict[str, Any]] = []
        for t in range(12):
            history.append({"role": "user", "content": f"Request {t}: " + "context words " * 400})
            resp = client.messages.create(model="claude-x", messages=history, max_tokens=50)
            history.append({"role": "assistant", "content": resp.content})
        state = client.stratamem.compactor.state
        assert state.compaction_count >= 1 and len(summ.requests) == state.compaction_count
    sent = server.requests[-1].body["messages"]
    assert sent[0]["content"].startswith("[Checkpoint")
    assert len(sent) < len(history)
    assert server.input_tokens(server.requests[-1]) <= SMALL["threshold"]
    assert len(mem.turns("s")) == 24  # every request message and every response, once


def test_a_replayed_history_after_a_restart_is_not_stored_twice(server: FakeLLMServer, db_path: Path) -> None:
    cfg = Config.from_dict({"pyramid": {"enabled": False}})
    history: list[dict[str, Any]] = [{"role": "user", "content": "Hi."}]
    with Memory(db_path, namespace="agent", config=cfg) as mem:
        client = stratamem.wrap(oai(server), memory=mem, session="s")
        resp = client.chat.completions.create(model="m", messages=history, max_tokens=5)
        history += [
            {"role": "assistant", "content": resp.choices[0].message.content},
            {"role": "user", "content": "More."},
        ]
        client.chat.completions.create(model="m", messages=history, max_tokens=5)
        assert len(mem.turns("s")) == 4
    with Memory(db_path, namespace="agent", config=cfg) as mem:  # restart; the caller kept its list
        client = stratamem.wrap(oai(server), memory=mem, session="s")
        history += [{"role": "assistant", "content": "Sure, done."}, {"role": "user", "content": "Last."}]
        client.chat.completions.create(model="m", messages=history, max_tokens=5)
        assert [t for _, t in stored_texts(mem)] == [
            "Hi.",
            "Sure, done.",
            "More.",
            "Sure, done.",
            "Last.",
            "Sure, done.",
        ]


def test_resume_through_the_wrapper_sends_the_stored_turns(server: FakeLLMServer, db_path: Path) -> None:
    cfg = Config.from_dict({"pyramid": {"enabled": False}})
    with Memory(db_path, namespace="agent", config=cfg) as mem:
        client = stratamem.wrap(ant(server), memory=mem, session="s")
        client.messages.create(model="m", messages=[{"role": "user", "content": "Remember 42."}], max_tokens=5)
    with Memory(db_path, namespace="agent", config=cfg) as mem:
        client = stratamem.wrap(ant(server), memory=mem, session="s")
        resumed = client.stratamem.resume_messages()
        assert [m["role"] for m in resumed] == ["user", "assistant"]
        client.messages.create(model="m", messages=[{"role": "user", "content": "What was it?"}], max_tokens=5)
        assert [m["role"] for m in server.requests[-1].body["messages"]] == ["user", "assistant", "user"]
        assert server.requests[-1].body["messages"][0]["content"] == "Remember 42."
        assert len(mem.turns("s")) == 4


def test_wrap_refuses_what_it_cannot_wrap() -> None:
    with pytest.raises(ValidationError):
        stratamem.wrap(object())


def test_summary_model_uses_the_callers_client_and_is_not_stored(db_path: Path) -> None:
    with (
        FakeLLMServer(reply=checkpoint_reply) as s,
        Memory(
            db_path, namespace="agent", config=Config.from_dict({"pyramid": {"enabled": False}, "compaction": SMALL})
        ) as mem,
    ):
        client = stratamem.wrap(oai(s), memory=mem, session="s", summary_model="mini")
        history: list[dict[str, Any]] = []
        for t in range(10):
            history.append({"role": "user", "content": f"Request {t}: " + "context words " * 400})
            resp = client.chat.completions.create(model="big", messages=history, max_tokens=50)
            history.append({"role": "assistant", "content": resp.choices[0].message.content})
        models = [r.model for r in s.requests]
        assert "mini" in models
        assert client.stratamem.compactor.state.last_status == "compacted"
        assert len(mem.turns("s")) == 20


# --- streaming ----------------------------------------------------------------------------


def test_openai_stream_yields_the_providers_chunks_and_stores_the_reply(server: FakeLLMServer, mem: Memory) -> None:
    server.script("one two three four five six seven")
    client = stratamem.wrap(oai(server), memory=mem, session="s")
    stream = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Count."}], max_tokens=50, stream=True
    )
    chunks = list(stream)
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    assert all(c.choices for c in chunks)  # the usage chunk the caller did not ask for is not shown
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == "one two three four five six seven"
    assert server.requests[-1].body["stream_options"] == {"include_usage": True}
    assert stored_texts(mem)[-1] == ("assistant", "one two three four five six seven")
    assert client.stratamem.compactor.state.last_usage["output_tokens"] == TOK.count(
        "one two three four five six seven"
    )


def test_openai_stream_shows_the_usage_chunk_when_asked(server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(oai(server), memory=mem, session="s")
    with client.chat.completions.create(
        model="m",
        messages=[{"role": "user", "content": "Hi."}],
        max_tokens=50,
        stream=True,
        stream_options={"include_usage": True},
    ) as stream:
        chunks = list(stream)
    assert chunks[-1].usage is not None and not chunks[-1].choices
    assert client.stratamem.compactor.state.last_usage["input_tokens"] == chunks[-1].usage.prompt_tokens


def test_anthropic_create_stream_events_and_stored_reply(server: FakeLLMServer, mem: Memory) -> None:
    server.script("streamed answer here")
    client = stratamem.wrap(ant(server), memory=mem, session="s")
    events = list(
        client.messages.create(model="m", messages=[{"role": "user", "content": "Go."}], max_tokens=50, stream=True)
    )
    assert [e.type for e in events][:2] == ["message_start", "content_block_start"]
    assert events[-1].type == "message_stop"
    assert stored_texts(mem) == [("user", "Go."), ("assistant", "streamed answer here")]
    usage = client.stratamem.compactor.state.last_usage
    assert usage["input_tokens"] == server.input_tokens(server.requests[-1])
    assert usage["output_tokens"] == TOK.count("streamed answer here")


def test_anthropic_messages_stream_context_manager(server: FakeLLMServer, mem: Memory) -> None:
    server.script("hello from the stream")
    client = stratamem.wrap(ant(server), memory=mem, session="s")
    with client.messages.stream(model="m", messages=[{"role": "user", "content": "Say hi."}], max_tokens=50) as st:
        text = "".join(st.text_stream)
    assert text == "hello from the stream"
    assert stored_texts(mem) == [("user", "Say hi."), ("assistant", "hello from the stream")]


def test_an_abandoned_stream_stores_no_reply(server: FakeLLMServer, mem: Memory) -> None:
    server.script("a b c d e f g h i j k l m n o p")
    client = stratamem.wrap(oai(server), memory=mem, session="s")
    with client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "Go."}], max_tokens=50, stream=True
    ) as stream:
        next(iter(stream))
    assert stored_texts(mem) == [("user", "Go.")]


# --- async -------------------------------------------------------------------------------


def test_async_clients_create_and_stream(server: FakeLLMServer, mem: Memory) -> None:
    async def main() -> None:
        oc = stratamem.wrap(
            openai.AsyncOpenAI(base_url=server.openai_base_url, api_key="k", max_retries=0), memory=mem, session="o"
        )
        r = await oc.chat.completions.create(model="m", messages=[{"role": "user", "content": "A?"}], max_tokens=9)
        assert r.choices[0].message.content == "Sure, done."
        server.script("async streamed")
        stream = await oc.chat.completions.create(
            model="m",
            messages=[
                {"role": "user", "content": "A?"},
                {"role": "assistant", "content": "Sure, done."},
                {"role": "user", "content": "B?"},
            ],
            max_tokens=9,
            stream=True,
        )
        text = "".join([c.choices[0].delta.content or "" async for c in stream])
        assert text == "async streamed"
        ac = stratamem.wrap(
            anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0), memory=mem, session="a"
        )
        m = await ac.messages.create(model="m", messages=[{"role": "user", "content": "C?"}], max_tokens=9)
        assert m.content[0].text == "Sure, done."
        server.script("from async stream")
        async with ac.messages.stream(
            model="m",
            max_tokens=9,
            messages=[
                {"role": "user", "content": "C?"},
                {"role": "assistant", "content": "Sure, done."},
                {"role": "user", "content": "D?"},
            ],
        ) as st:
            got = "".join([t async for t in st.text_stream])
        assert got == "from async stream"

    asyncio.run(main())
    assert stored_texts(mem, "o") == [
        ("user", "A?"),
        ("assistant", "Sure, done."),
        ("user", "B?"),
        ("assistant", "async streamed"),
    ]
    assert stored_texts(mem, "a") == [
        ("user", "C?"),
        ("assistant", "Sure, done."),
        ("user", "D?"),
        ("assistant", "from async stream"),
    ]


def test_compaction_config_passes_through_wrap(server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(
        oai(server), memory=mem, session="s", config=CompactionConfig(threshold=50_000, keep_recent_tokens=10_000)
    )
    assert client.stratamem.compactor.config.threshold == 50_000
    assert client.models is client.unwrapped.models  # everything else passes through


# --- a real tool loop through the wrapper ----------------------------------------------------


@pytest.mark.parametrize("stream", [False, True])
def test_openai_tool_loop_through_the_wrapper(stream: bool, server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(oai(server), memory=mem, session="s")
    history: list[Any] = [{"role": "user", "content": "Open a.py"}]
    server.script_tool_call("read_file", {"path": "src/a.py", "lines": [1, 40]})
    if stream:
        chunks = list(client.chat.completions.create(model="m", messages=history, max_tokens=50, stream=True))
        call_id = chunks[0].choices[0].delta.tool_calls[0].id
        args = "".join(
            c.choices[0].delta.tool_calls[0].function.arguments or ""
            for c in chunks
            if c.choices and c.choices[0].delta.tool_calls
        )
        history.append(
            {
                "role": "assistant",
                "tool_calls": [
                    {"id": call_id, "type": "function", "function": {"name": "read_file", "arguments": args}}
                ],
            }
        )
    else:
        resp = client.chat.completions.create(model="m", messages=history, max_tokens=50)
        assert resp.choices[0].finish_reason == "tool_calls"
        call_id = resp.choices[0].message.tool_calls[0].id
        history.append(resp.choices[0].message)
    history.append({"role": "tool", "tool_call_id": call_id, "content": "print('a')\n" * 30})
    client.chat.completions.create(model="m", messages=history, max_tokens=50)
    turns = mem.turns("s")
    assert [t.role for t in turns] == ["user", "assistant", "tool", "assistant"]
    (use,) = turns[1].turn.content
    assert (use.id, use.name, dict(use.input)) == (call_id, "read_file", {"path": "src/a.py", "lines": [1, 40]})
    sent = server.requests[-1].body["messages"]
    assert [m["role"] for m in sent] == ["user", "assistant", "tool"]
    assert sent[1]["tool_calls"][0]["id"] == call_id


@pytest.mark.parametrize("how", ["create", "stream", "manager"])
def test_anthropic_tool_loop_through_the_wrapper(how: str, server: FakeLLMServer, mem: Memory) -> None:
    client = stratamem.wrap(ant(server), memory=mem, session="s")
    history: list[Any] = [{"role": "user", "content": "Open a.py"}]
    server.script_tool_call("read_file", {"path": "src/a.py"})
    args: dict[str, Any] = {"model": "m", "max_tokens": 50, "system": "Use tools."}
    if how == "create":
        content = client.messages.create(messages=history, **args).content
    elif how == "stream":
        events = list(client.messages.create(messages=history, stream=True, **args))
        assert [e.type for e in events if e.type == "content_block_delta"]
        content = None
    else:
        with client.messages.stream(messages=history, **args) as st:
            content = st.get_final_message().content
    stored = mem.turns("s")[-1].turn.content
    (use,) = stored
    assert (use.name, dict(use.input)) == ("read_file", {"path": "src/a.py"})
    history.append(
        {
            "role": "assistant",
            "content": content
            if content is not None
            else [{"type": "tool_use", "id": use.id, "name": use.name, "input": dict(use.input)}],
        }
    )
    history.append(
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use.id, "content": "print('a')\n" * 30}]}
    )
    client.messages.create(messages=history, **args)
    assert [t.role for t in mem.turns("s")] == ["user", "assistant", "tool", "assistant"]
    sent = server.requests[-1]
    assert [m["role"] for m in sent.body["messages"]] == ["user", "assistant", "user"]
    assert client.stratamem.compactor.state.last_usage["input_tokens"] == server.input_tokens(sent)
