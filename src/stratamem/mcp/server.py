"""The MCP server itself: the SDK, strict arguments, one-line errors, the namespace guard, ``build_server``.

The tools are registered by the groups in :mod:`stratamem.mcp.tools`; the
package's front door (:mod:`stratamem.mcp`) says what the server offers.
"""

# No ``from __future__ import annotations`` here: the SDK builds each tool's JSON
# schema from its evaluated annotations, which refer to names local to build_server.
import os
import threading
from collections.abc import Callable, Collection
from typing import TYPE_CHECKING, Annotated, Any, TypeVar

from ..errors import ConfigError, StratamemError, ValidationError
from .tools import (
    add_admin_tools,
    add_conversation_tool,
    add_expand_tool,
    add_item_tools,
    add_state_tools,
    add_turn_tools,
)

if TYPE_CHECKING:
    from mcp.server.mcpserver import MCPServer

    from ..memory import Memory

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
    "expand",
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
    "past turns and summaries with scores; expand gives the full turns behind an id they show; "
    "add_memory stores a fact/decision/entity/preference/event/context item; "
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
    add_turn_tools(kit)
    add_item_tools(kit)
    add_admin_tools(kit)
    add_conversation_tool(kit)
    add_expand_tool(kit)
    if project_dir is not None:
        add_state_tools(server, kit.spaces, project_dir, kit.call, kit.Namespace)
    # Strict schemas: clients see that arguments outside the schema are refused.
    for tool in server._tool_manager.list_tools():
        tool.parameters["additionalProperties"] = False
    return server
