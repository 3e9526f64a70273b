"""The outermost ASGI layer: an unexpected exception ends as one 500, and the connection stays usable.

Starlette's error middleware sends the 500 page (through the app's handler,
which logs the traceback) and then re-raises, so that servers see the failure;
uvicorn answers a re-raised exception by closing the connection, and a client
reusing it for its next request gets a reset. Here the exception stops once
the response is complete; one that arrives before any response is logged and
answered with the JSON 500 body; one in the middle of a response still
reaches the server, which must close the half-sent answer.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from .errors import error_body
from .security import Message, Receive, Scope, Send

__all__ = ["ErrorGuard"]

log = logging.getLogger("stratamem.web")


class ErrorGuard:
    """Wrap ``app`` so that an unexpected exception never costs the client its connection.

    Args:
        app: The application (the security layer around the routes).
    """

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        state = {"started": False, "complete": False}

        async def tracked(message: Message) -> None:
            if message["type"] == "http.response.start":
                state["started"] = True
            elif message["type"] == "http.response.body" and not message.get("more_body", False):
                state["complete"] = True
            await send(message)

        try:
            await self.app(scope, receive, tracked)
        except Exception:
            if state["complete"]:
                return  # answered (and logged by the app's handler): keep the connection
            if state["started"]:
                raise  # half an answer went out: only closing the connection can end it
            log.exception("unexpected error on %s %s", scope.get("method"), scope.get("path"))
            body = json.dumps(error_body("InternalError", "unexpected server error (see the server log)")).encode()
            headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
            await send({"type": "http.response.start", "status": 500, "headers": headers})
            await send({"type": "http.response.body", "body": body})
