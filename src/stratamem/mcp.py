"""The MCP server: memory tools for agent hosts, over the official ``mcp`` SDK.

A thin shell: each tool validates its arguments through its JSON schema
(generated from the signature; the SDK rejects bad input before the tool
runs), makes one library call and returns the result's JSON form. A
:class:`~stratamem.errors.StratamemError` becomes an MCP tool error whose text
names the error class and says what was wrong.

One server serves one namespace (the :class:`~stratamem.memory.Memory` it is
built with). Tools take an optional ``namespace`` argument, accepted only for
namespaces the server was configured to allow, so an agent cannot reach
another agent's memory by naming it.

Tools: ``memory_add``, ``memory_recall``, ``memory_spill``, ``memory_promote``,
``memory_status`` (seed 003), ``memory_context`` (assembled context with its
manifest), ``memory_seal_topic`` (manual topic boundary) and, when the server
has a project directory, ``memory_state_read`` / ``memory_state_update`` (the
working state of :mod:`stratamem.state`, one atomic operation per call), and
``conversation_show`` (agent-loop conversation state: checkpoint, compactions,
failures, last usage). The CLI shell is ``stratamem mcp`` (:mod:`stratamem.cli.mcp`).
Requires the ``mcp`` extra.
"""

# No ``from __future__ import annotations`` here: the SDK builds each tool's JSON
# schema from its evaluated annotations, which refer to names local to build_server.
import os
import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Annotated, Any, Literal, TypeVar

from .errors import ConfigError, StratamemError, ValidationError

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from .memory import Memory

__all__ = ["STATE_TOOLS", "TOOLS", "build_server"]

TOOLS: tuple[str, ...] = ("memory_add", "memory_recall", "memory_spill", "memory_promote", "memory_status",
                          "memory_context", "memory_seal_topic")
"""Names of the tools every server registers."""
TOOLS += ("conversation_show",)  # the agent-loop view (issue 17), registered by _add_conversation_tool

STATE_TOOLS: tuple[str, ...] = ("memory_state_read", "memory_state_update")
"""Working-state tools, registered when the server is given a project directory."""

_T = TypeVar("_T")

_INSTRUCTIONS = (
    "Long-term memory for this agent. memory_add stores a fact/decision/entity/preference/context item in hot "
    "memory (spilling older items when the hot token limit would be passed); memory_recall searches spilled "
    "(warm and cold) items and may promote them back to hot; memory_status reports tiers and suggestions; "
    "memory_context assembles the conversation context within a token budget, with a manifest."
)


def _import_sdk() -> tuple[Any, Any]:
    try:
        from mcp.server.mcpserver import MCPServer
        from mcp.server.mcpserver.exceptions import ToolError
    except ImportError as exc:
        raise ConfigError("the MCP server needs the 'mcp' extra: pip install 'stratamem[mcp]'") from exc
    return MCPServer, ToolError


class _Namespaces:
    """The memories a server may use: its own namespace plus the configured extras."""

    def __init__(self, memory: "Memory", allowed: Collection[str]) -> None:
        self.default = memory
        self.allowed = frozenset(allowed)
        self._open: dict[str, "Memory"] = {memory.namespace: memory}
        self._lock = threading.Lock()

    def get(self, namespace: str | None) -> "Memory":
        if namespace is None or namespace == self.default.namespace:
            return self.default
        if "*" not in self.allowed and namespace not in self.allowed:
            raise ValidationError(f"this server serves namespace {self.default.namespace!r}; "
                                  f"{namespace!r} is not allowed", path="namespace")
        with self._lock:
            if namespace not in self._open:
                self._open[namespace] = self.default.for_namespace(namespace)
            return self._open[namespace]


def build_server(memory: "Memory", *, allow_namespaces: Collection[str] = (), name: str = "stratamem",
                 project_dir: "str | os.PathLike[str] | None" = None) -> "MCPServer":
    """An MCP server exposing ``memory``'s items and context as tools.

    Args:
        memory: The memory to serve (its namespace is the server's).
        allow_namespaces: Other namespaces a tool call may name (``"*"`` allows any).
        name: Server name announced to clients.
        project_dir: Project whose working state the state tools read and update
            (``None``: no state tools).

    Returns:
        An ``mcp.server.mcpserver.MCPServer``; run it with ``.run("stdio")`` or
        ``.run("streamable-http", host=..., port=...)``.

    Raises:
        ConfigError: The ``mcp`` package is not installed.
    """
    from pydantic import Field

    server_cls, tool_error = _import_sdk()
    from importlib.metadata import version

    server = server_cls(name, instructions=_INSTRUCTIONS, version=version("stratamem"), log_level="WARNING")
    spaces = _Namespaces(memory, allow_namespaces)

    def call(fn: Callable[[], _T]) -> _T:
        try:
            return fn()
        except StratamemError as exc:
            raise tool_error(f"{type(exc).__name__}: {exc}") from exc

    Namespace = Annotated[str | None, Field(description="Namespace (default: the server's own).")]
    ItemType = Literal["fact", "decision", "entity", "preference", "context"]

    @server.tool(name="memory_add", description="Add an item to hot memory; spills older items if the hot "
                 "token limit would be exceeded. Returns the stored item.")
    def memory_add(content: Annotated[str, Field(min_length=1, description="The knowledge, as text.")],
                   type: Annotated[ItemType, Field(description="Kind of item.")] = "fact",
                   session: Annotated[str | None, Field(description="Session label.")] = None,
                   key: Annotated[str | None, Field(description="Subject key: replaces live items with the same "
                                                    "key (e.g. 'project.budget').")] = None,
                   supersedes: Annotated[list[int] | None, Field(description="Ids of older items this one "
                                                                 "replaces.")] = None,
                   namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.add(
            content, type, session=session, key=key, supersedes=supersedes or ()).to_dict())

    @server.tool(name="memory_recall", description="Recall relevant items from warm and cold memory "
                 "(semantic + lexical). Updates access counts; strong or frequent matches are promoted to hot.")
    def memory_recall(query: Annotated[str, Field(min_length=1, description="What to search for.")],
                      limit: Annotated[int, Field(ge=1, le=100, description="Most items to return.")] = 3,
                      auto_promote: Annotated[bool, Field(description="Promote matches to hot.")] = True,
                      types: Annotated[list[ItemType] | None, Field(description="Only these types.")] = None,
                      namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.recall(
            query, limit, auto_promote=auto_promote, types=types).to_dict())

    @server.tool(name="memory_spill", description="Force items out of hot memory to warm/cold storage: "
                 "the given ids, or `count` lowest-relevance/oldest items.")
    def memory_spill(count: Annotated[int | None, Field(ge=1, le=10_000, description="Number of items to "
                                                        "spill.")] = None,
                     ids: Annotated[list[int] | None, Field(description="Specific hot items to spill.")] = None,
                     namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.spill(count, ids=ids).to_dict())

    @server.tool(name="memory_promote", description="Move one item to hot memory, spilling others if needed.")
    def memory_promote(id: Annotated[int, Field(description="Item id.")],
                       namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.promote(id).to_dict())

    @server.tool(name="memory_status", description="Memory tier status (items, tokens, hot utilization), "
                 "suggestions (spill / recall / prune) and metrics.")
    def memory_status(namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: spaces.get(namespace).items.status().to_dict())

    @server.tool(name="memory_context", description="Assemble the context for the next model call within a "
                 "token budget, with a manifest saying what is in it and why.")
    def memory_context(query: Annotated[str | None, Field(description="What the next call is about.")] = None,
                       budget: Annotated[int | None, Field(ge=1, description="Token budget.")] = None,
                       session: Annotated[str | None, Field(description="Session to draw from.")] = None,
                       format: Annotated[Literal["openai", "anthropic", "text"],
                                         Field(description="Message format.")] = "openai",
                       namespace: Namespace = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ctx = spaces.get(namespace).context(query, budget=budget, session=session, format=format)
            return {"format": ctx.format, "messages": [dict(m) for m in ctx.messages], "system": ctx.system,
                    "text": ctx.text if ctx.format == "text" else None, "tokens": ctx.tokens,
                    "manifest": ctx.manifest.to_dict()}
        return call(run)

    @server.tool(name="memory_seal_topic", description="Close the current topic of a session now: its open "
                 "turns become a segment (summarized and searchable). Returns the segment, or null if no turn "
                 "was open.")
    def memory_seal_topic(session: Annotated[str, Field(min_length=1, description="Session.")] = "default",
                          namespace: Namespace = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            node = spaces.get(namespace).seal(session)
            return {"sealed": node is not None, "segment": node.to_dict() if node is not None else None}
        return call(run)

    if project_dir is not None:
        _add_state_tools(server, spaces, project_dir, call, Namespace)
    _add_conversation_tool(server, spaces, call, Namespace)
    return server


def _add_state_tools(server: Any, spaces: _Namespaces, project_dir: "str | os.PathLike[str]",
                     call: Callable[[Callable[[], Any]], Any], Namespace: Any) -> None:
    """Register the working-state tools (seed 004) for ``project_dir``."""
    from pydantic import Field

    from .state import TASK_STATUSES, WorkingState

    def state(namespace: str | None) -> WorkingState:
        mem = spaces.get(namespace)
        return WorkingState(project_dir, mem.namespace, config=mem.config.state, tokenizer=mem.tokenizer)

    @server.tool(name="memory_state_read", description="The working state (goal, now, decisions, tasks, "
                 "conventions) and its prompt projection within a token budget.")
    def memory_state_read(budget: Annotated[int | None, Field(ge=1, description="Projection budget in "
                                                                               "tokens.")] = None,
                          namespace: Namespace = None) -> dict[str, Any]:
        def run() -> dict[str, Any]:
            ws = state(namespace)
            proj = ws.project(budget)
            return {"state": ws.read(), "projection": {"text": proj.text, "format": proj.format,
                                                       "tokens": proj.tokens, "budget": proj.budget}}
        return call(run)

    Op = Literal["set_goal", "set_now", "decide", "add_task", "update_task", "complete_task", "set_convention"]
    Status = Literal[TASK_STATUSES]  # type: ignore[valid-type]

    @server.tool(name="memory_state_update", description="Apply one change to the working state, atomically: "
                 "set_goal/set_now (text), decide (text = title, why), add_task (text), update_task (id, status "
                 "and/or text), complete_task (id), set_convention (key, value; no value removes it).")
    def memory_state_update(op: Annotated[Op, Field(description="The change.")],
                            text: Annotated[str | None, Field(description="Goal, now, decision or task text.")] = None,
                            why: Annotated[str | None, Field(description="Reason for a decision.")] = None,
                            id: Annotated[str | None, Field(description="Task id (T-1 ...).")] = None,
                            status: Annotated[Status | None, Field(description="Task status.")] = None,
                            key: Annotated[str | None, Field(description="Convention key.")] = None,
                            value: Annotated[str | None, Field(description="Convention value.")] = None,
                            namespace: Namespace = None) -> dict[str, Any]:
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


def _add_conversation_tool(server: Any, spaces: _Namespaces, call: Callable[[Callable[[], Any]], Any],
                           Namespace: Any) -> None:
    """Register ``conversation_show``: the agent-loop state of a conversation (issue 17)."""
    from pydantic import Field

    from .agentloop.report import conversation_report

    @server.tool(name="conversation_show", description="Agent-loop state of a conversation: its checkpoint, "
                 "compaction count, last status and error, summarizer failures, deferred compactions and the "
                 "last provider-reported usage. Without a session: every session that has state.")
    def conversation_show(session: Annotated[str | None, Field(description="Session (default: all).")] = None,
                          namespace: Namespace = None) -> dict[str, Any]:
        return call(lambda: conversation_report(spaces.get(namespace), session))
