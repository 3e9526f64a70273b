"""The MCP tools, one registering function per group: turns and context, memory items,
administration (forget, namespaces), the agent-loop conversation, the working state.

Each group is handed the server's :class:`~stratamem.mcp.server._Kit` (the SDK's
``Field``, the namespace guard, the error mapping); another group is one more
function here and one call in :func:`~stratamem.mcp.server.build_server`.
"""

# No ``from __future__ import annotations`` here: the SDK builds each tool's JSON
# schema from its evaluated annotations, which refer to names local to each group.
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any, Literal

from ..errors import NotFoundError, ValidationError
from ..text import MAX_QUERY_CHARS

if TYPE_CHECKING:
    from .server import _Kit, _Namespaces

__all__ = [
    "add_admin_tools",
    "add_conversation_tool",
    "add_expand_tool",
    "add_item_tools",
    "add_state_tools",
    "add_turn_tools",
]


def add_turn_tools(kit: "_Kit") -> None:
    """Conversation turns: store them, assemble a budgeted context, search, seal a topic."""
    from ..context.policies import policy_names
    from ..mcp_budget import MIN_BUDGET, context_result, hits_result, parse_now

    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)
    # The registry's names, read when the server is built (the schema's enum).
    PolicyName: Any = Literal[policy_names()]

    def add_turns(
        messages: Annotated[
            list[dict[str, Any]],
            Field(min_length=1, description="Messages in order: OpenAI chat, Anthropic or canonical turns."),
        ],
        session: Annotated[str, Field(min_length=1, description="Session (conversation) name.")] = "default",
        format: Annotated[
            Literal["auto", "openai", "anthropic", "turns"], Field(description="Message shape (auto detects).")
        ] = "auto",
        idempotency_key: Annotated[
            str | None,
            Field(
                max_length=255,
                description="Send the same call again with this key (within 24 h) to get the first call's "
                "turns without storing anything twice.",
            ),
        ] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            stored = spaces.get(namespace).add(
                messages, session=session, format=format, idempotency_key=idempotency_key
            )
            return {
                "stored": len(stored),
                "session": session,
                "turn_ids": [t.id for t in stored],
                "tokens": sum(t.tokens for t in stored),
            }

        return call(run)

    kit.register(
        add_turns,
        "add_turns",
        "Store conversation messages (one call = one transaction) as turns of a "
        "session. Returns the new turn ids and their exact token count.",
    )

    def get_context(
        query: Annotated[
            str | None, Field(max_length=MAX_QUERY_CHARS, description="What the next call is about.")
        ] = None,
        budget: Annotated[
            int,
            Field(ge=MIN_BUDGET, le=1_000_000, description="Token budget of the whole result (context and manifest)."),
        ] = 2000,
        session: Annotated[str | None, Field(description="Current session (default: the most recent).")] = None,
        format: Annotated[
            Literal["text", "openai", "responses", "anthropic"],
            Field(
                description="text, or provider messages as JSON (openai: Chat "
                "Completions, responses: Responses input items)."
            ),
        ] = "text",
        explain: Annotated[bool, Field(description="Add the full manifest if it fits the budget.")] = False,
        policy: Annotated[PolicyName | None, Field(description="Budget policy (default from config).")] = None,
        now: Annotated[
            str | None,
            Field(
                description="When the query is asked, ISO 8601 (naive = "
                "UTC), for relative times (default: the newest turn's "
                "time)."
            ),
        ] = None,
        provider: Annotated[
            Literal["openai", "anthropic"] | None,
            Field(description="Whose token counting the budget is in (default: the format's provider)."),
        ] = None,
        model: Annotated[str | None, Field(description="Target model (recorded in the manifest).")] = None,
        system_prompts: Annotated[
            Literal["session", "namespace"],
            Field(description="Whose system prompts go in: the session's own (default), or every session's."),
        ] = "session",
        namespace: Namespace = None,
    ) -> str:
        return call(
            lambda: context_result(
                spaces.get(namespace),
                query=query,
                budget=budget,
                session=session,
                fmt=format,
                explain=explain,
                policy=policy,
                now=parse_now(now),
                provider=provider,
                model=model,
                project_dir=kit.project_dir,
                system_prompts=system_prompts,
            )
        )

    kit.register(
        get_context,
        "get_context",
        "The context for the next model call: recent turns, recalled "
        "history, summaries and memory items, within `budget` tokens counting everything returned, with "
        "a short manifest; explain=true makes room for the explanation: the full manifest if it fits, "
        "else one line per item with the id forget and expand take.",
        text=True,
    )

    def search_memory(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=100, description="Most hits.")] = 10,
        session: Annotated[str | None, Field(description="Only this session.")] = None,
        budget: Annotated[
            int | None, Field(ge=MIN_BUDGET, description="Token budget of the result: fewer hits when they do not fit.")
        ] = None,
        namespace: Namespace = None,
    ) -> str:
        def run() -> str:
            mem = spaces.get(namespace)
            return hits_result(mem.search(query, k=k, session=session), budget=budget, count=mem.tokenizer.count)

        return call(run)

    kit.register(
        search_memory,
        "search_memory",
        "Ranked past turns and summaries for a query, each with its score breakdown and the turn ids it covers.",
        text=True,
    )

    def seal_topic(
        session: Annotated[str | None, Field(description="Session (default: the most recently written one).")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            mem = spaces.get(namespace)
            name = session if session is not None else mem.store.latest_session(mem.namespace)
            if name is None:
                raise NotFoundError(f"namespace {mem.namespace!r} has no session to seal")
            node = mem.seal(name)
            return {
                "session": name,
                "sealed": node is not None,
                "segment": node.to_dict() if node is not None else None,
            }

        return call(run)

    kit.register(
        seal_topic,
        "seal_topic",
        "Close the current topic of a session now: its open turns become a "
        "segment (summarized and searchable). Returns the segment, or null if no turn was open.",
    )


def add_item_tools(kit: "_Kit") -> None:
    """Long-term memory items (seed 003)."""
    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)
    ItemType = Literal["fact", "decision", "entity", "preference", "event", "context", "message"]
    Session = Annotated[
        str | None,
        Field(
            description="The session reading: sees namespace-wide items and its "
            "own session-scoped ones (default: namespace-wide items only)."
        ),
    ]

    def add_memory(
        content: Annotated[str, Field(min_length=1, description="The knowledge, as text.")],
        type: Annotated[ItemType, Field(description="Kind of item.")] = "fact",
        session: Annotated[str | None, Field(description="Session the item is added in.")] = None,
        scope: Annotated[
            Literal["namespace", "session"],
            Field(description="namespace: every session sees it; session: only `session` does (needs session)."),
        ] = "namespace",
        key: Annotated[
            str | None,
            Field(description="Subject key: replaces live items with the same key and scope (e.g. 'project.budget')."),
        ] = None,
        supersedes: Annotated[list[int] | None, Field(description="Ids of older items this one replaces.")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        return call(
            lambda: (
                spaces.get(namespace)
                .items.add(content, type, session=session, key=key, supersedes=supersedes or (), scope=scope)
                .to_dict()
            )
        )

    kit.register(
        add_memory,
        "add_memory",
        "Add a memory item (fact, decision, entity, preference, event, context, "
        "message) to hot memory, for the namespace or only its session; spills older items if the hot "
        "token limit would be exceeded. Returns the item.",
    )

    def memory_recall(
        query: Annotated[str, Field(min_length=1, max_length=MAX_QUERY_CHARS, description="What to search for.")],
        limit: Annotated[int, Field(ge=1, le=100, description="Most items to return.")] = 3,
        auto_promote: Annotated[bool, Field(description="Promote matches to hot.")] = True,
        types: Annotated[list[ItemType] | None, Field(description="Only these types.")] = None,
        session: Session = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        return call(
            lambda: (
                spaces.get(namespace)
                .items.recall(query, limit, auto_promote=auto_promote, types=types, session=session)
                .to_dict()
            )
        )

    kit.register(
        memory_recall,
        "memory_recall",
        "Recall relevant items from warm and cold memory (semantic + "
        "lexical). Updates access counts; strong or frequent matches are promoted to hot.",
    )

    def memory_spill(
        count: Annotated[int | None, Field(ge=1, le=10_000, description="Number of items to spill.")] = None,
        ids: Annotated[list[int] | None, Field(description="Specific hot items to spill.")] = None,
        session: Annotated[
            str | None,
            Field(description="Choose the `count` items among those this session sees (default: every hot item)."),
        ] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.spill(count, ids=ids, session=session).to_dict())

    kit.register(
        memory_spill,
        "memory_spill",
        "Force items out of hot memory to warm/cold storage: the given ids, or `count` lowest-relevance/oldest items.",
    )

    def memory_promote(
        id: Annotated[int, Field(description="Item id.")], namespace: Namespace = None
    ) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.promote(id).to_dict())

    kit.register(
        memory_promote,
        "memory_promote",
        "Move one item to hot memory, spilling only as many others as needed to make room.",
    )

    def memory_status(
        session: Annotated[
            str | None, Field(description="Count only what this session sees (default: every item).")
        ] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            mem = spaces.get(namespace)
            out: dict[str, Any] = mem.items.status(session).to_dict()
            st = mem.status()
            out["storage"] = {"turns": st.turns, "store_bytes": st.store_bytes, "part_bytes": dict(st.part_bytes)}
            return out

        return call(run)

    kit.register(
        memory_status,
        "memory_status",
        "Memory tier status (items, tokens, hot utilization), the review queue (extracted items waiting, its cap), "
        "suggestions (spill / recall / prune), metrics and the store's bytes per part.",
    )


def add_admin_tools(kit: "_Kit") -> None:
    """Forgetting and the namespaces this server may serve."""
    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)

    def forget(
        turns: Annotated[
            list[int | str] | None,
            Field(
                min_length=1,
                description="Ids to forget, as search and contexts show them: turn:N (or N), node:N (the turns "
                "a summary covers), system:<hash> (every copy of a system prompt).",
            ),
        ] = None,
        session: Annotated[str | None, Field(description="Forget this whole session.")] = None,
        all_namespace: Annotated[bool, Field(description="Forget the whole namespace (needs confirm).")] = False,
        confirm: Annotated[str | None, Field(description="The namespace's name, required with all_namespace.")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            mem = spaces.get(namespace)
            if all_namespace and confirm != mem.namespace:
                raise ValidationError(f"forgetting the whole namespace needs confirm={mem.namespace!r}", path="confirm")
            return mem.forget(turns=turns, session=session, all_namespace=all_namespace).to_dict()

        return call(run)

    kit.register(
        forget,
        "forget",
        "Delete turns (ids such as turn:805 or node:50), a session, or the whole namespace, with everything "
        "derived from them (summaries rebuilt, items, archive, manifests). Irreversible. Give exactly one "
        "of turns, session, all_namespace.",
    )

    def list_namespaces() -> dict[str, Any]:
        def run() -> dict[str, Any]:
            stats = [s for s in spaces.default.namespaces() if spaces.may(s.namespace)]
            return {
                "served": spaces.default.namespace,
                "namespaces": [
                    {"namespace": s.namespace, "sessions": s.sessions, "turns": s.turns, "tokens": s.tokens}
                    for s in stats
                ],
            }

        return call(run)

    kit.register(
        list_namespaces,
        "list_namespaces",
        "Namespaces this server may serve (its own and the allowed ones) with their sessions, turns and tokens.",
    )


def add_state_tools(
    server: Any,
    spaces: "_Namespaces",
    project_dir: "str | os.PathLike[str]",
    call: Callable[[Callable[[], Any]], Any],
    Namespace: Any,
) -> None:
    """Register the working-state tools (seed 004) for ``project_dir``."""
    from pydantic import Field

    from ..state.working import TASK_STATUSES, WorkingState

    def state(namespace: str | None) -> WorkingState:
        mem = spaces.get(namespace)
        return WorkingState(project_dir, mem.namespace, config=mem.config.state, tokenizer=mem.tokenizer)

    @server.tool(
        name="memory_state_read",
        description="The working state (goal, now, decisions, tasks, "
        "conventions) and its prompt projection within a token budget.",
    )
    def memory_state_read(
        budget: Annotated[int | None, Field(ge=1, description="Projection budget in tokens.")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ws = state(namespace)
            proj = ws.project(budget)
            return {
                "state": ws.read(),
                "projection": {"text": proj.text, "format": proj.format, "tokens": proj.tokens, "budget": proj.budget},
            }

        return call(run)

    Op = Literal["set_goal", "set_now", "decide", "add_task", "update_task", "complete_task", "set_convention"]
    Status: Any = Literal[TASK_STATUSES]  # built from the tuple at run time, like PolicyName

    @server.tool(
        name="memory_state_update",
        description="Apply one change to the working state, atomically: "
        "set_goal/set_now (text), decide (text = title, why), add_task (text), update_task (id, status "
        "and/or text), complete_task (id), set_convention (key, value; no value removes it).",
    )
    def memory_state_update(
        op: Annotated[Op, Field(description="The change.")],
        text: Annotated[str | None, Field(description="Goal, now, decision or task text.")] = None,
        why: Annotated[str | None, Field(description="Reason for a decision.")] = None,
        id: Annotated[str | None, Field(description="Task id (T-1 ...).")] = None,
        status: Annotated[Status | None, Field(description="Task status.")] = None,
        key: Annotated[str | None, Field(description="Convention key.")] = None,
        value: Annotated[str | None, Field(description="Convention value.")] = None,
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def need(v: Any, what: str) -> Any:
            if v is None:
                raise ValidationError(f"{op} needs {what}", path=what)
            return v

        def run() -> dict[str, Any]:
            ws = state(namespace)
            if op == "set_goal":
                result = ws.set_goal(need(text, "text"))
            elif op == "set_now":
                result = ws.set_now(need(text, "text"))
            elif op == "decide":
                result = ws.decide(need(text, "text"), why or "")
            elif op == "add_task":
                result = ws.add_task(need(text, "text"))
            elif op == "update_task":
                result = ws.update_task(need(id, "id"), status=status, title=text)
            elif op == "complete_task":
                result = ws.complete_task(need(id, "id"))
            else:
                result = ws.set_convention(need(key, "key"), value)
            return {"op": op, "result": result}

        return call(run)


def add_conversation_tool(kit: "_Kit") -> None:
    """Register ``conversation_show``: the agent-loop state of a conversation (issue 17)."""
    from ..agentloop.report import conversation_report

    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)

    def conversation_show(
        session: Annotated[str | None, Field(description="Session (default: all).")] = None, namespace: Namespace = None
    ) -> dict[str, Any]:
        return call(lambda: conversation_report(spaces.get(namespace), session))

    kit.register(
        conversation_show,
        "conversation_show",
        "Agent-loop state of a conversation: its checkpoint, "
        "compaction count, last status and error, summarizer failures, deferred compactions and the "
        "last provider-reported usage. Without a session: every session that has state.",
    )


def add_expand_tool(kit: "_Kit") -> None:
    """Register ``expand``: the full turns behind an id that search or a context showed."""
    from ..mcp_budget import MIN_BUDGET, turns_result

    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)

    def expand(
        id: Annotated[
            int | str,
            Field(description="An id as shown: turn:N, node:N (a bare number is a node), system:<hash>."),
        ],
        budget: Annotated[
            int | None,
            Field(ge=MIN_BUDGET, description="Token budget of the result: fewer turns when they do not fit."),
        ] = None,
        namespace: Namespace = None,
    ) -> str:
        def run() -> str:
            mem = spaces.get(namespace)
            turns = mem.expand(id)
            return turns_result(str(id), turns, budget=budget, count=mem.tokenizer.count)

        return call(run)

    kit.register(
        expand,
        "expand",
        "The full turns behind an id from search_memory or a context's manifest: turn:N is that turn, "
        "node:N the turns a summary covers, system:<hash> every copy of that system prompt. In order; with "
        "`budget`, as many as fit.",
        text=True,
    )
