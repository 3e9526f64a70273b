"""The HTTP shell: a JSON API with an OpenAPI schema and a server-rendered dashboard.

A thin layer over :class:`stratamem.Memory` (no SQL, no memory rules here):
each route validates its input, makes library calls and returns their JSON
form or an HTML page. Parts, one concept each:

* :mod:`~stratamem.web.security` — who may call (bearer token, per-token
  namespace allow-list), Host/Origin checks against DNS rebinding, bounded bodies.
* :mod:`~stratamem.web.errors` — the exception tree mapped to HTTP statuses and
  the one JSON error body.
* :mod:`~stratamem.web.spaces` — the open memories, one per namespace, and the
  lock that serializes library calls.
* :mod:`~stratamem.web.api` — the JSON routes under ``/api/v1``.
* :mod:`~stratamem.web.pages` and :mod:`~stratamem.web.views` — the dashboard;
  :mod:`~stratamem.web.apiref` — the API reference page and ``docs/api.md``.
* :mod:`~stratamem.web.app` — :func:`create_app`, wiring the above.

The command is ``stratamem serve`` (:mod:`stratamem.cli.serve`). Requires the
``web`` extra: ``pip install 'stratamem[web]'``.
"""

from __future__ import annotations

from .app import create_app
from .security import Security

__all__ = ["Security", "create_app"]
