"""A fake LLM endpoint: a real HTTP server on 127.0.0.1 for OpenAI and Anthropic clients.

:class:`FakeLLMServer` serves OpenAI ``POST /v1/chat/completions`` and
Anthropic ``POST /v1/messages`` so code under test runs its production path
(the official ``openai``/``anthropic`` client libraries, real sockets)
without any model. Replies are deterministic: scripted strings consumed in
order, then a reply function of the request. Failures (HTTP status codes or
a dropped connection) and delays can be injected for the next calls, and
every request is recorded.

Usage reported by the server is exact and reproducible: input tokens are the
``o200k_base`` count of the system prompt and message texts, output tokens
the count of the reply. (A real provider frames requests with a few extra
tokens; tests of calibration can set :attr:`FakeLLMServer.input_overhead`.)

Example::

    with FakeLLMServer(reply="hello") as server:
        model = OpenAIChat("fake", base_url=server.openai_base_url)
        assert model.complete("", [{"role": "user", "content": "hi"}], max_tokens=5).text == "hello"
        assert server.requests[0].api == "openai"

:func:`checkpoint_reply` is a reply function that answers a compaction
request with a small, deterministic structured checkpoint, for tests and
benchmarks of :mod:`stratamem.agentloop`.
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ._http import JSONHandler, LocalHTTPServer

__all__ = ["FakeLLMServer", "Failure", "RecordedRequest", "checkpoint_reply"]


@dataclass(frozen=True, slots=True)
class RecordedRequest:
    """One request the server received."""

    api: str
    """``openai`` or ``anthropic``."""
    path: str
    """Request path."""
    body: Mapping[str, Any]
    """Parsed JSON body."""
    headers: Mapping[str, str]
    """Request headers (lower-cased names)."""

    @property
    def model(self) -> str | None:
        """Model named in the request."""
        return self.body.get("model")

    @property
    def max_tokens(self) -> int | None:
        """``max_tokens`` of the request."""
        return self.body.get("max_tokens")

    @property
    def system(self) -> str:
        """System prompt (Anthropic ``system`` or OpenAI system messages, joined)."""
        if self.api == "anthropic":
            return _text_of(self.body.get("system") or "")
        return "\n".join(_text_of(m.get("content")) for m in self.body.get("messages", [])
                         if m.get("role") in ("system", "developer"))

    @property
    def messages(self) -> list[dict[str, Any]]:
        """Conversation messages (OpenAI system messages excluded)."""
        return [dict(m) for m in self.body.get("messages", []) if m.get("role") not in ("system", "developer")]

    @property
    def prompt_text(self) -> str:
        """The text of all non-system messages joined by blank lines."""
        return "\n\n".join(_text_of(m.get("content")) for m in self.messages)


@dataclass(frozen=True, slots=True)
class Failure:
    """An injected failure for one call."""

    status: int = 500
    """HTTP status to answer with; 0 closes the connection without an answer."""
    delay_s: float = 0.0
    """Seconds to wait before failing (use it to provoke client timeouts)."""


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


Reply = Callable[[RecordedRequest], str]
"""A reply function: request in, answer text out."""


class FakeLLMServer(LocalHTTPServer):
    """A threaded HTTP server on 127.0.0.1 (a free port) that answers like a chat model.

    Args:
        reply: Default answer: a fixed string or a :data:`Reply` function
            (default: ``"OK"``).
        model: Model name reported when a request names none.
        tokenizer: Tokenizer name for usage numbers (``o200k_base``).

    Use as a context manager, or call :meth:`start` and :meth:`close`.
    Configuration methods are thread-safe and may be called while serving.
    """

    def __init__(self, reply: str | Reply = "OK", *, model: str = "fake-model",
                 tokenizer: str = "o200k_base") -> None:
        from ..tokens import get_tokenizer

        super().__init__(thread_name="fake-llm-server")
        self.reply: Reply = (lambda _req, _text=reply: _text) if isinstance(reply, str) else reply
        self.model = model
        self.input_overhead = 0
        """Tokens added to every reported input count (simulates provider framing)."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in order (failed ones included)."""
        self._tokenizer = get_tokenizer(tokenizer)
        self._script: deque[str] = deque()
        self._failures: deque[Failure] = deque()
        self._delays: deque[float] = deque()
        self._lock = threading.Lock()

    # --- configuration ------------------------------------------------------------------

    def script(self, *replies: str) -> None:
        """Answer the next calls with ``replies``, in order, before falling back to :attr:`reply`."""
        with self._lock:
            self._script.extend(replies)

    def fail_next(self, count: int = 1, *, status: int = 500, delay_s: float = 0.0) -> None:
        """Make the next ``count`` calls fail with ``status`` (0 = drop the connection)."""
        with self._lock:
            self._failures.extend(Failure(status, delay_s) for _ in range(count))

    def delay_next(self, seconds: float, count: int = 1) -> None:
        """Delay the next ``count`` successful answers by ``seconds`` each."""
        with self._lock:
            self._delays.extend([seconds] * count)

    # --- lifecycle ----------------------------------------------------------------------

    @property
    def openai_base_url(self) -> str:
        """``url + "/v1"``: the OpenAI client's ``base_url``."""
        return self.url + "/v1"

    @property
    def anthropic_base_url(self) -> str:
        """Same as :attr:`url`: the Anthropic client adds ``/v1/messages`` itself."""
        return self.url

    def _handler(self) -> type[JSONHandler]:
        return _make_handler(self)

    # --- answering (called from handler threads) ----------------------------------------

    def _next(self, req: RecordedRequest) -> tuple[Failure | None, str | None, float]:
        with self._lock:
            self.requests.append(req)
            if self._failures:
                return self._failures.popleft(), None, 0.0
            delay = self._delays.popleft() if self._delays else 0.0
            text = self._script.popleft() if self._script else None
        return None, text if text is not None else self.reply(req), delay

    def _usage(self, req: RecordedRequest, text: str) -> tuple[int, int]:
        prompt = req.system + "\n" + req.prompt_text
        return self._tokenizer.count(prompt) + self.input_overhead, self._tokenizer.count(text)

    def _answer(self, api: str, req: RecordedRequest, text: str) -> dict[str, Any]:
        model = req.model or self.model
        max_tokens = req.max_tokens
        finish = "stop" if api == "openai" else "end_turn"
        if isinstance(max_tokens, int) and self._tokenizer.count(text) > max_tokens:
            # Honour max_tokens like a real model: cut the answer and say so.
            from ..tokens import truncate_to_tokens

            text = truncate_to_tokens(text, max_tokens, self._tokenizer)
            finish = "length" if api == "openai" else "max_tokens"
        n_in, n_out = self._usage(req, text)
        stamp = int(time.time())
        if api == "openai":
            return {"id": f"chatcmpl-fake-{len(self.requests)}", "object": "chat.completion", "created": stamp,
                    "model": model, "choices": [{"index": 0, "finish_reason": finish,
                                                 "message": {"role": "assistant", "content": text}}],
                    "usage": {"prompt_tokens": n_in, "completion_tokens": n_out, "total_tokens": n_in + n_out}}
        return {"id": f"msg_fake_{len(self.requests)}", "type": "message", "role": "assistant", "model": model,
                "content": [{"type": "text", "text": text}], "stop_reason": finish, "stop_sequence": None,
                "usage": {"input_tokens": n_in, "output_tokens": n_out}}


def _make_handler(server: FakeLLMServer) -> type[JSONHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:  # noqa: N802 - stdlib naming
            api = {"/v1/chat/completions": "openai", "/v1/messages": "anthropic"}.get(self.path.split("?")[0])
            raw = self.read_body()
            if api is None:
                self.send_json(404, {"error": {"type": "not_found_error", "message": f"no route {self.path}"}})
                return
            try:
                body = json.loads(raw or b"{}")
            except json.JSONDecodeError:
                self.send_json(400, {"error": {"type": "invalid_request_error", "message": "body is not JSON"}})
                return
            req = RecordedRequest(api, self.path, body, {k.lower(): v for k, v in self.headers.items()})
            if body.get("stream"):
                self.send_json(400, {"error": {"type": "invalid_request_error", "message": "streaming is not faked"}})
                return
            failure, text, delay = server._next(req)
            if failure is not None:
                time.sleep(failure.delay_s)
                if failure.status == 0:
                    self.drop_connection()
                    return
                self.send_json(failure.status, {"type": "error", "error": {"type": "api_error",
                                                                            "message": "injected failure"}})
                return
            time.sleep(delay)
            self.send_json(200, server._answer(api, req, text or ""))

    return Handler


# --- a deterministic summarizer ---------------------------------------------------------

_PATH_RE = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.\w{1,5})\b")
_SECTIONS = ("Goal", "Constraints & Preferences", "Progress", "Key Decisions", "Next Steps", "Critical Context")


def checkpoint_reply(request: RecordedRequest) -> str:
    """Answer a compaction request with a deterministic structured checkpoint.

    Keeps the previous checkpoint's bullet lines (if the request carries one),
    adds the first line of each user request it sees as progress, and lists
    file paths mentioned. It imitates the format, not the judgement, of a model.
    """
    text = request.prompt_text
    previous: dict[str, list[str]] = {s: [] for s in _SECTIONS}
    current = None
    for line in text.splitlines():
        heading = line[3:].strip() if line.startswith("## ") else None
        if heading in previous:
            current = heading
        elif heading is not None or line.startswith("# "):
            current = None
        elif current and line.startswith(("- ", "1. ")):
            previous[current].append(line)
    requests = [line.split(":", 1)[1].strip()[:120] for line in text.splitlines()
                if line.startswith("[user]:") and len(line) > 8]
    goal = requests[0] if requests else "Continue the task."
    paths = sorted(set(_PATH_RE.findall(text)))[:12]
    done = previous["Progress"] + [f"- [x] {r}" for r in requests[:-1]]
    progress = list(dict.fromkeys(done))[-12:]
    context = list(dict.fromkeys(previous["Critical Context"] + [f"- `{p}`" for p in paths]))[-16:]
    out = ["## Goal", previous["Goal"][0] if previous["Goal"] else f"- {goal}",
           "", "## Constraints & Preferences", *(previous["Constraints & Preferences"] or ["- none stated"]),
           "", "## Progress", "### Done", *(progress or ["- [x] nothing yet"]),
           "### In Progress", f"- [ ] {requests[-1] if requests else 'current request'}",
           "", "## Key Decisions", *(previous["Key Decisions"] or ["- none recorded"]),
           "", "## Next Steps", "1. Continue with the latest request.",
           "", "## Critical Context", *(context or ["- none"])]
    return "\n".join(out)
