"""The MCP server: memory tools for agent hosts, over the official ``mcp`` SDK.

A thin shell: each tool makes one library call and returns text. Arguments
are checked strictly: every input schema says ``additionalProperties:
false``, an unknown argument is refused with a one-line error naming it, and
a schema violation comes back as one line (``ValidationError: <field>:
<problem>``) instead of the SDK's multi-line dump. A
:class:`~stratamem.errors.StratamemError` comes back as ``<ErrorClass>:
<message>``.

Results keep their budget: ``get_context`` returns text whose exact token
count is within ``budget`` including everything it returns (the manifest is
summarised in a few lines; the full manifest only with ``explain`` and only
if it fits), and ``search_memory`` keeps its hits within ``budget`` when one
is given (:mod:`stratamem.mcp_budget`).

One server serves one namespace (the :class:`~stratamem.memory.Memory` it is
built with). Tools take an optional ``namespace`` argument, accepted only for
namespaces the server was configured to allow, so an agent cannot reach
another agent's memory by naming it; ``list_namespaces`` lists only those.

Tools (:data:`TOOLS`): ``add_turns``, ``add_memory``, ``search_memory``,
``get_context``, ``forget``, ``list_namespaces``, ``seal_topic`` and seed
003's ``memory_recall``, ``memory_spill``, ``memory_promote``,
``memory_status``; the earlier names ``memory_add``, ``memory_context`` and
``memory_seal_topic`` stay as aliases (:data:`ALIASES`). With a project
directory, ``memory_state_read`` / ``memory_state_update`` too; ``conversation_show``
gives a conversation's agent-loop state (checkpoint, compactions, failures,
last usage). Each group
of tools is registered by its own function, so another group is one more
function. The CLI shell is ``stratamem mcp`` (:mod:`stratamem.cli.mcp`).
Requires the ``mcp`` extra.
"""

# No ``from __future__ import annotations`` here: the SDK builds each tool's JSON
# schema from its evaluated annotations, which refer to names local to build_server.
import os
import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from .errors import ConfigError, NotFoundError, StratamemError, ValidationError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .memory import Memory

__all__ = ["ALIASES", "STATE_TOOLS", "TOOLS", "build_server", "one_line"]

ALIASES: dict[str, str] = {
    "memory_add": "add_memory",
    "memory_context": "get_context",
    "memory_seal_topic": "seal_topic",
}
"""Earlier tool names, kept for existing clients: ``old name -> tool it calls``."""

TOOLS: tuple[str, ...] = (
    "add_turns",
    "add_memory",
    "search_memory",
    "get_context",
    "forget",
    "list_namespaces",
    "seal_topic",
    "conversation_show",
    "memory_recall",
    "memory_spill",
    "memory_promote",
    "memory_status",
    *ALIASES,
)
"""Names of the tools every server registers (aliases included)."""

STATE_TOOLS: tuple[str, ...] = ("memory_state_read", "memory_state_update")
"""Working-state tools, registered when the server is given a project directory."""

_T = TypeVar("_T")

_INSTRUCTIONS = (
    "Long-term memory for this agent. add_turns stores conversation messages; get_context assembles what to "
    "remember for the next call within a token budget (the whole result fits the budget); search_memory finds "
    "past turns and summaries with scores; add_memory stores a fact/decision/entity/preference/context item; "
    "memory_recall searches spilled items and may promote them; forget deletes turns, a session or the whole "
    "namespace for good."
)


def _import_sdk() -> tuple[Any, Any]:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise ConfigError("the MCP server needs the 'mcp' extra: pip install 'stratamem[mcp]'") from exc
    return MCPServer, ToolError


def one_line(tool: str, exc: BaseException) -> str:
    """A tool failure as one line: ``ValidationError: <field>: <problem>`` or ``<ErrorClass>: <message>``."""
    from pydantic import ValidationError as PydanticError

    cause = exc.__cause__
    if isinstance(cause, PydanticError):
        errors = cause.errors()
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"]) or "arguments"
        more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
        return f"ValidationError: {where}: {first['msg']}{more}"
    text = str(exc)
    prefix = f"Error executing tool {tool}: "
    if text.startswith(prefix):
        text = text[len(prefix) :]
    return " ".join(text.split())


def _strict(server_cls: Any, tool_error: Any) -> Any:
    """``server_cls`` refusing unknown arguments and answering every tool error in one line."""

    class StrictServer(server_cls):
        async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
            tool = self._tool_manager.get_tool(name)
            if tool is not None:
                known = tool.parameters.get("properties", {})
                unknown = [k for k in arguments or {} if k not in known]
                if unknown:
                    raise tool_error(
                        f"ValidationError: {unknown[0]}: unknown argument of {name} "
                        f"(known: {', '.join(known) or 'none'})"
                    )
            try:
                return await super().call_tool(name, arguments, context)
            except tool_error as exc:
                if type(exc) is not tool_error:  # an unexpected crash: the SDK reports it without details
                    raise
                raise tool_error(one_line(name, exc)) from exc.__cause__

    return StrictServer


class _Namespaces:
    """The memories a server may use: its own namespace plus the configured extras."""

    def __init__(self, memory: "Memory", allowed: Collection[str]) -> None:
        self.default = memory
        self.allowed = frozenset(allowed)
        self._open: dict[str, Memory] = {memory.namespace: memory}
        self._lock = threading.Lock()

    def may(self, namespace: str) -> bool:
        return namespace == self.default.namespace or "*" in self.allowed or namespace in self.allowed

    def get(self, namespace: str | None) -> "Memory":
        if namespace is None or namespace == self.default.namespace:
            return self.default
        if not self.may(namespace):
            raise ValidationError(
                f"this server serves namespace {self.default.namespace!r}; {namespace!r} is not allowed",
                path="namespace",
            )
        with self._lock:
            if namespace not in self._open:
                self._open[namespace] = self.default.for_namespace(namespace)
            return self._open[namespace]


class _Kit:
    """What every tool group needs: the SDK's ``Field``, the namespace guard and the error mapping."""

    def __init__(self, server: Any, spaces: _Namespaces, tool_error: Any) -> None:
        from pydantic import Field

        self.server, self.spaces, self.tool_error, self.Field = server, spaces, tool_error, Field
        # Built at run time (pydantic is imported with the server), so a type checker sees Any.
        self.Namespace: Any = Annotated[str | None, Field(description="Namespace (default: the server's own).")]
        self.project_dir: Any = None
        """Project directory the context tool passes to ``Memory.context`` (``None``: the memory's own)."""

    def call(self, fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StratamemError as exc:
            raise self.tool_error(f"{type(exc).__name__}: {' '.join(str(exc).split())}") from exc

    def register(self, fn: Callable[..., Any], name: str, description: str, *, text: bool = False) -> None:
        """Register ``fn`` as ``name`` and under every earlier name that is an alias of it."""
        kw = {"structured_output": False} if text else {}
        self.server.tool(name=name, description=description, **kw)(fn)
        for old, new in ALIASES.items():
            if new == name:
                self.server.tool(name=old, description=f"Alias of {name} (earlier name). {description}", **kw)(fn)


def build_server(
    memory: "Memory",
    *,
    allow_namespaces: Collection[str] = (),
    name: str = "stratamem",
    project_dir: "str | os.PathLike[str] | None" = None,
) -> "MCPServer":
    """An MCP server exposing ``memory``'s turns, context, search, items and forgetting as tools.

    Args:
        memory: The memory to serve (its namespace is the server's).
        allow_namespaces: Other namespaces a tool call may name (``"*"`` allows any).
        name: Server name announced to clients.
        project_dir: Project whose working state the state tools read and update,
            and whose instruction files and working state ``get_context`` puts in
            every context, as ``Memory.context(project_dir=...)`` does
            (``None``: no state tools; contexts use ``memory.project_dir``).

    Returns:
        An ``mcp.server.mcpserver.MCPServer``; run it with ``.run("stdio")`` or
        ``.run("streamable-http", host=..., port=...)``.

    Raises:
        ConfigError: The ``mcp`` package is not installed.
    """
    server_cls, tool_error = _import_sdk()
    from importlib.metadata import version

    server = _strict(server_cls, tool_error)(
        name, instructions=_INSTRUCTIONS, version=version("stratamem"), log_level="WARNING"
    )
    kit = _Kit(server, _Namespaces(memory, allow_namespaces), tool_error)
    # The context tool reads the same project as the state tools (None: the memory's own, if any).
    kit.project_dir = project_dir
    _add_turn_tools(kit)
    _add_item_tools(kit)
    _add_admin_tools(kit)
    _add_conversation_tool(kit)
    if project_dir is not None:
        _add_state_tools(server, kit.spaces, project_dir, kit.call, kit.Namespace)
    # Strict schemas: clients see that arguments outside the schema are refused.
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False
    return server


def _add_turn_tools(kit: _Kit) -> None:
    """Conversation turns: store them, assemble a budgeted context, search, seal a topic."""
    from .context.policies import policy_names
    from .mcp_budget import MIN_BUDGET, context_result, hits_result, parse_now

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
        namespace: Namespace = None,
    ) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            stored = spaces.get(namespace).add(messages, session=session, format=format)
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
        query: Annotated[str | None, Field(description="What the next call is about.")] = None,
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
            )
        )

    kit.register(
        get_context,
        "get_context",
        "The context for the next model call: recent turns, recalled "
        "history, summaries and memory items, within `budget` tokens counting everything returned, with "
        "a short manifest (the full one with explain=true, if it fits).",
        text=True,
    )

    def search_memory(
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
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


def _add_item_tools(kit: _Kit) -> None:
    """Long-term memory items (seed 003)."""
    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)
    ItemType = Literal["fact", "decision", "entity", "preference", "context", "message"]
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
        "Add a memory item (fact, decision, entity, preference, context, "
        "message) to hot memory, for the namespace or only its session; spills older items if the hot "
        "token limit would be exceeded. Returns the item.",
    )

    def memory_recall(
        query: Annotated[str, Field(min_length=1, description="What to search for.")],
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
        return call(lambda: spaces.get(namespace).items.status(session).to_dict())

    kit.register(
        memory_status,
        "memory_status",
        "Memory tier status (items, tokens, hot utilization), suggestions (spill / recall / prune) and metrics.",
    )


def _add_admin_tools(kit: _Kit) -> None:
    """Forgetting and the namespaces this server may serve."""
    Field, spaces, call = kit.Field, kit.spaces, kit.call
    Namespace: Any = kit.Namespace  # a run-time Annotated type (see _Kit)

    def forget(
        turns: Annotated[list[int] | None, Field(min_length=1, description="Turn ids to forget.")] = None,
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
        "Delete turns (ids), a session, or the whole namespace, with everything "
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


def _add_state_tools(
    server: Any,
    spaces: _Namespaces,
    project_dir: "str | os.PathLike[str]",
    call: Callable[[Callable[[], Any]], Any],
    Namespace: Any,
) -> None:
    """Register the working-state tools (seed 004) for ``project_dir``."""
    from pydantic import Field

    from .state.working import TASK_STATUSES, WorkingState

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


def _add_conversation_tool(kit: _Kit) -> None:
    """Register ``conversation_show``: the agent-loop state of a conversation (issue 17)."""
    from .agentloop.report import conversation_report

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
