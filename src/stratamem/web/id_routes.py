"""The routes that take back the ids search and contexts show: forget and expand.

Search hits and manifest items name what they show (``turn:805``,
``node:50``, ``system:HASH``); these routes accept the same ids, read by
:func:`stratamem.records.ids.parse_ref`, as the library, the CLI and the MCP
tools do. ``POST /namespaces/{ns}/forget`` takes the body of the MCP
``forget`` tool (forgetting a whole namespace needs ``confirm`` set to its
name); ``GET /namespaces/{ns}/expand/{id}`` gives the turns behind an id.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request

from ..errors import ValidationError
from .api import _ERRORS, principal
from .convert import turn_json
from .models import Forget
from .spaces import Spaces

__all__ = ["build_id_router"]


def build_id_router(spaces: Spaces) -> APIRouter:
    """The ``/api/v1`` routes that take turn, node and system-prompt ids."""
    r = APIRouter(prefix="/api/v1", responses=_ERRORS)

    @r.post(
        "/namespaces/{namespace}/forget",
        tags=["turns"],
        summary="Forget turns (ids as search and contexts show them), a session or the whole namespace, "
        "with everything derived from them",
    )
    def forget(request: Request, namespace: str, body: Forget) -> dict[str, Any]:
        m = spaces.get(namespace, principal(request))

        def run() -> dict[str, Any]:
            if body.all_namespace and body.confirm != m.namespace:
                raise ValidationError(f"forgetting the whole namespace needs confirm={m.namespace!r}", path="confirm")
            report = m.forget(
                turns=body.turns, session=body.session, all_namespace=body.all_namespace, vacuum=body.vacuum
            )
            return report.to_dict()

        return spaces.call(run)

    @r.get(
        "/namespaces/{namespace}/expand/{id}",
        tags=["turns"],
        summary="The turns behind an id: turn:N itself, node:N (or N) the turns a node covers, "
        "system:HASH every copy of that system prompt",
    )
    def expand(request: Request, namespace: str, id: str) -> dict[str, Any]:
        m = spaces.get(namespace, principal(request))
        turns = spaces.call(lambda: m.expand(id))
        return {"id": id, "turns": [turn_json(t) for t in turns], "total": len(turns)}

    return r
