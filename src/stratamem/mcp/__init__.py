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
function (:mod:`stratamem.mcp.tools`; the server: :mod:`stratamem.mcp.server`). The CLI shell is
``stratamem mcp`` (:mod:`stratamem.cli.mcp`).
Requires the ``mcp`` extra.
"""

from .server import ALIASES, STATE_TOOLS, TOOLS, build_server, one_line

__all__ = ["ALIASES", "STATE_TOOLS", "TOOLS", "build_server", "one_line"]
