"""StratamemStore against LangGraph's own InMemoryStore, in a compiled graph, and the LangChain middleware."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.store.base import BaseStore
from langgraph.store.memory import InMemoryStore

from stratamem import AsyncMemory, Memory, ValidationError
from stratamem.config import CompactionConfig, PruningConfig
from stratamem.integrations.langgraph import StratamemMiddleware, StratamemStore


class ToolCallingFake(GenericFakeChatModel):
    """LangChain's GenericFakeChatModel, accepting tools as a tool-calling model does."""

    def bind_tools(self, tools: Any, **kwargs: Any) -> ToolCallingFake:
        return self


def _summary(item: Any) -> tuple[Any, ...]:
    return (item.namespace, item.key, item.value)


_labels = st.sampled_from(["users", "u1", "u 2", "prefs", "été"])
_ns = st.lists(_labels, min_size=1, max_size=3).map(tuple)
_keys = st.sampled_from(["a", "b", "c.d", "key with space"])
_values = st.one_of(
    st.none(), st.fixed_dictionaries({"n": st.integers(0, 3)}, optional={"tag": st.sampled_from(["x", "y"])})
)
_ops = st.lists(st.tuples(_ns, _keys, _values), min_size=1, max_size=15)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=_ops, flt=st.sampled_from([None, {"n": 1}, {"tag": "x"}, {"n": {"$gte": 2}}, {"n": {"$ne": 0}}]))
def test_store_behaves_like_langgraphs_in_memory_store(ops: list[Any], flt: Any) -> None:
    """Differential conformance: the same puts and deletes, the same answers (values, keys, namespaces)."""
    theirs = InMemoryStore()
    mem = Memory(":memory:", namespace="base")
    ours = StratamemStore(mem)
    for ns, key, value in ops:
        for store in (theirs, ours):
            if value is None:
                store.delete(ns, key)
            else:
                store.put(ns, key, value)
    for ns, key, _ in ops:
        a, b = theirs.get(ns, key), ours.get(ns, key)
        assert (a is None and b is None) or _summary(a) == _summary(b)
    # Namespaces holding values (as LangGraph's PostgresStore lists them; InMemoryStore also keeps
    # ones that were only ever deleted from).
    live = {i.namespace for i in theirs.search((), limit=1000)}
    assert ours.list_namespaces() == [ns for ns in theirs.list_namespaces() if ns in live]
    assert ours.list_namespaces(prefix=("users",)) == [
        ns for ns in theirs.list_namespaces(prefix=("users",)) if ns in live
    ]
    assert ours.list_namespaces(suffix=("prefs",), max_depth=1) == sorted({ns[:1] for ns in live if ns[-1] == "prefs"})
    assert ours.list_namespaces(limit=1, offset=1) == sorted(live)[1:2]
    for prefix in [(), ("users",), ops[0][0]]:
        got = sorted(map(_summary, ours.search(prefix, filter=flt, limit=100)), key=repr)
        want = sorted(map(_summary, theirs.search(prefix, filter=flt, limit=100)), key=repr)
        assert got == want
    mem.close()


def test_store_keeps_history_timestamps_and_persists(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "s.db", namespace="base")
    store = StratamemStore(mem)
    assert isinstance(store, BaseStore)
    store.put(("users", "u1"), "prefs", {"theme": "dark"})
    first = store.get(("users", "u1"), "prefs")
    store.put(("users", "u1"), "prefs", {"theme": "light"})
    second = store.get(("users", "u1"), "prefs")
    assert second.value == {"theme": "light"} and second.created_at == first.created_at
    assert second.updated_at >= first.updated_at
    # Every version stays in stratamem as a turn of the key's session.
    versions = mem.for_namespace("lg.users.u1").turns("k.prefs")
    assert [v.turn.metadata["langgraph"]["value"] for v in versions] == [{"theme": "dark"}, {"theme": "light"}]
    store.delete(("users", "u1"), "prefs")
    assert store.get(("users", "u1"), "prefs") is None
    assert store.list_namespaces() == []
    store.put(("users", "u1"), "prefs", {"theme": "blue"})
    mem.close()
    mem2 = Memory(tmp_path / "s.db", namespace="base")
    assert StratamemStore(mem2).get(("users", "u1"), "prefs").value == {"theme": "blue"}
    mem2.close()


def test_search_query_ranks_by_hybrid_recall(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "q.db", namespace="base", embedder=None)  # lexical: scores are exact
    store = StratamemStore(mem)
    store.put(("facts",), "1", {"text": "The user's dog is called Biscuit"})
    store.put(("facts",), "2", {"text": "The user prefers window seats on flights"})
    store.put(("facts",), "3", {"text": "Budget for the offsite is 50K"}, index=False)
    store.put(("facts",), "2", {"text": "The user prefers aisle seats on flights"})
    hits = store.search(("facts",), query="which seats on flights", limit=3)
    assert hits[0].key == "2" and hits[0].value["text"].startswith("The user prefers aisle")
    assert hits[0].score is not None and hits[0].score > 0
    assert {h.key for h in hits if h.score is None} == {"1", "3"}  # no shared term; unindexed never matches
    assert store.search(("facts",), query="dog name", limit=1)[0].key == "1"
    with pytest.raises(ValidationError):
        store.put(("facts",), "x", ["not", "a", "dict"])  # type: ignore[arg-type]
    mem.close()


def test_async_batch_in_a_compiled_graph(tmp_path: Path) -> None:
    """A compiled StateGraph whose node reads and writes the store through LangGraph's runtime."""
    from langgraph.runtime import Runtime

    amem = AsyncMemory(tmp_path / "g.db", namespace="base")
    store = StratamemStore(amem)
    model = GenericFakeChatModel(messages=iter([AIMessage("Hello Ada"), AIMessage("Still Ada")]))

    async def chat(state: MessagesState, runtime: Runtime) -> dict[str, Any]:
        ns = ("users", "ada")
        seen = await runtime.store.aget(ns, "profile")
        visits = (seen.value["visits"] if seen else 0) + 1
        await runtime.store.aput(ns, "profile", {"name": "Ada", "visits": visits})
        reply = await model.ainvoke(state["messages"])
        return {"messages": [reply]}

    graph = (
        StateGraph(MessagesState)
        .add_node("chat", chat)
        .add_edge(START, "chat")
        .compile(store=store, checkpointer=InMemorySaver())
    )

    async def go() -> None:
        cfg = {"configurable": {"thread_id": "t1"}}
        out1 = await graph.ainvoke({"messages": [HumanMessage("hi")]}, cfg)
        out2 = await graph.ainvoke({"messages": [HumanMessage("again")]}, cfg)
        assert out1["messages"][-1].content == "Hello Ada" and out2["messages"][-1].content == "Still Ada"
        item = await store.aget(("users", "ada"), "profile")
        assert item.value == {"name": "Ada", "visits": 2}
        assert await store.alist_namespaces() == [("users", "ada")]
        await amem.close()

    asyncio.run(go())


@tool
def read_file(path: str) -> str:
    """Read a file."""
    return f"<{path}> " + "line of code\n" * 150


def _tool_call(i: int) -> AIMessage:
    return AIMessage("", tool_calls=[{"name": "read_file", "args": {"path": f"f{i}.py"}, "id": f"call{i}"}])


def test_middleware_stores_prunes_and_compacts_inside_create_agent(tmp_path: Path) -> None:
    mem = Memory(tmp_path / "m.db", namespace="agent")
    script = [_tool_call(i) if i % 2 == 0 else AIMessage(f"done {i}") for i in range(12)]
    agent_model = ToolCallingFake(messages=iter(script))
    summarizer = GenericFakeChatModel(
        messages=iter(
            [AIMessage("## Goal\nRead the files.\n## Progress\nRead f0-f4.\n## Key facts\nAll files are code.")] * 5
        )
    )
    middleware = StratamemMiddleware(
        mem,
        model=summarizer,
        compaction=CompactionConfig(
            threshold=1500, keep_recent_tokens=500, output_reserve=300, checkpoint_max_tokens=300
        ),
        pruning=PruningConfig(
            soft_trim_chars=2000, soft_trim_head=300, soft_trim_tail=300, hard_clear_after=2, keep_last_tool_results=1
        ),
    )
    agent = create_agent(
        agent_model, tools=[read_file], middleware=[middleware], checkpointer=InMemorySaver(), store=StratamemStore(mem)
    )
    cfg = {"configurable": {"thread_id": "job-7"}}
    for i in range(6):
        out = agent.invoke({"messages": [HumanMessage(f"read f{2 * i}.py")]}, cfg)
        assert out["messages"][-1].content == f"done {2 * i + 1}"
    # Every message the agent saw is stored verbatim in stratamem, tool output whole.
    turns = mem.turns("job-7")
    results = [t for t in turns if t.role == "tool"]
    assert len(results) == 6 and all(r.text.count("line of code") == 150 for r in results)
    assert [t.text for t in turns if t.role == "user"][:2] == ["read f0.py", "read f2.py"]
    # The live state is short: pruned and compacted.
    state = out["messages"]
    tool_msgs = [m for m in state if isinstance(m, ToolMessage)]
    assert all(m.content.count("line of code") < 150 for m in tool_msgs[:-1])
    result = middleware.last_results["job-7"]
    assert result.tokens <= 1500
    assert mem.store.conversations.get("agent", "job-7").compaction_count >= 1
    assert any("Read the files." in str(m.content) for m in state)
    mem.close()


def test_async_middleware_runs_on_the_memory_worker(tmp_path: Path) -> None:
    amem = AsyncMemory(tmp_path / "am.db", namespace="agent")
    agent_model = ToolCallingFake(messages=iter([_tool_call(0), AIMessage("ok")]))
    agent = create_agent(
        agent_model, tools=[read_file], middleware=[StratamemMiddleware(amem)], checkpointer=InMemorySaver()
    )

    async def go() -> None:
        out = await agent.ainvoke({"messages": [HumanMessage("read f0.py")]}, {"configurable": {"thread_id": "a1"}})
        assert out["messages"][-1].content == "ok"
        assert [t.role for t in await amem.turns("a1")] == ["user", "assistant", "tool"]
        await amem.close()

    asyncio.run(go())
