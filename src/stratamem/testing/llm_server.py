"""A fake LLM endpoint: a real HTTP server on 127.0.0.1 for OpenAI and Anthropic clients.

:class:`FakeLLMServer` serves OpenAI ``POST /v1/chat/completions`` and
Anthropic ``POST /v1/messages`` so code under test runs its production path
(the official ``openai``/``anthropic`` client libraries, real sockets)
without any model. Replies are deterministic: scripted strings consumed in
order, then a reply function of the request. Failures (HTTP status codes or
a dropped connection) and delays can be injected for the next calls, and
every request is recorded.

Usage reported by the server is computed from the request actually received,
with the real tokenizer (``o200k_base``) and fixed, documented framing costs
(:func:`request_input_tokens`): every text, tool call (name + JSON arguments),
tool result — Anthropic ``tool_result`` blocks included — thinking block,
image and tool definition counts. The framing constants differ on purpose from
:mod:`stratamem.tokens`' estimates, as a real provider's do, so calibration has
something to learn; :attr:`FakeLLMServer.input_overhead` adds a fixed amount
per request on top. Output tokens are the count of the reply.

``"stream": true`` is answered with server-sent events in each provider's
format: OpenAI ``chat.completion.chunk`` objects ending in ``data: [DONE]``
(with a usage chunk when ``stream_options.include_usage`` is set), Anthropic
``message_start`` / ``content_block_*`` / ``message_delta`` / ``message_stop``
events (input tokens in ``message_start``, output tokens in ``message_delta``).

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
from typing import Any

from ._http import JSONHandler, LocalHTTPServer
from .llm_requests import (
    FRAME_MESSAGE,
    FRAME_REQUEST,
    FRAME_TOOL,
    FRAME_TOOL_DEFINITION,
    IMAGE_INPUT_TOKENS,
    Failure,
    RecordedRequest,
    ToolCall,
    request_input_tokens,
)
from .prompt_cache import FakePromptCache

__all__ = [
    "FRAME_MESSAGE",
    "FRAME_REQUEST",
    "FRAME_TOOL",
    "FRAME_TOOL_DEFINITION",
    "IMAGE_INPUT_TOKENS",
    "FakeLLMServer",
    "FakePromptCache",
    "Failure",
    "RecordedRequest",
    "ToolCall",
    "checkpoint_reply",
    "request_input_tokens",
]

Reply = Callable[[RecordedRequest], str]
"""A reply function: request in, answer text out."""


def _always(text: str) -> Reply:
    """A reply that is ``text`` whatever the request."""
    return lambda _req: text


class FakeLLMServer(LocalHTTPServer):
    """A threaded HTTP server on 127.0.0.1 (a free port) that answers like a chat model.

    Args:
        reply: Default answer: a fixed string or a :data:`Reply` function
            (default: ``"OK"``).
        model: Model name reported when a request names none.
        tokenizer: Tokenizer name for usage numbers (``o200k_base``).
        prompt_cache: Report prompt-cache usage as a caching provider does
            (:class:`~stratamem.testing.prompt_cache.FakePromptCache`); default none.

    Use as a context manager, or call :meth:`start` and :meth:`close`.
    Configuration methods are thread-safe and may be called while serving.
    """

    def __init__(
        self,
        reply: str | Reply = "OK",
        *,
        model: str = "fake-model",
        tokenizer: str = "o200k_base",
        prompt_cache: FakePromptCache | None = None,
    ) -> None:
        from ..tokens import get_tokenizer

        super().__init__(thread_name="fake-llm-server")
        self.reply: Reply = _always(reply) if isinstance(reply, str) else reply
        self.model = model
        self.input_overhead = 0
        """Tokens added to every reported input count (simulates provider framing)."""
        self.requests: list[RecordedRequest] = []
        """Every request received, in order (failed ones included)."""
        self.prompt_cache = prompt_cache
        """A :class:`~stratamem.testing.prompt_cache.FakePromptCache`: usage then reports cache reads and writes."""
        self._splits: dict[int, tuple[int, int]] = {}
        self._tokenizer = get_tokenizer(tokenizer)
        self._script: deque[str | ToolCall] = deque()
        self._failures: deque[Failure] = deque()
        self._delays: deque[float] = deque()
        self._lock = threading.Lock()

    # --- configuration ------------------------------------------------------------------

    def script(self, *replies: str) -> None:
        """Answer the next calls with ``replies``, in order, before falling back to :attr:`reply`."""
        with self._lock:
            self._script.extend(replies)

    def script_tool_call(self, name: str, arguments: Mapping[str, Any] | None = None) -> None:
        """Answer the next call (after earlier scripted replies) with a call of tool ``name``.

        OpenAI gets ``tool_calls`` with finish reason ``tool_calls``, Anthropic a
        ``tool_use`` block with stop reason ``tool_use``; streamed, the arguments
        arrive in JSON pieces (``tool_calls`` deltas / ``input_json_delta``).
        """
        with self._lock:
            self._script.append(ToolCall(name, dict(arguments or {})))

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

    def _next(self, req: RecordedRequest) -> tuple[Failure | None, str | ToolCall | None, float]:
        with self._lock:
            self.requests.append(req)
            if self._failures:
                return self._failures.popleft(), None, 0.0
            delay = self._delays.popleft() if self._delays else 0.0
            text = self._script.popleft() if self._script else None
        return None, text if text is not None else self.reply(req), delay

    def input_tokens(self, req: RecordedRequest) -> int:
        """Input tokens this server reports for ``req`` (:func:`request_input_tokens` + :attr:`input_overhead`)."""
        return request_input_tokens(req.api, req.body, self._tokenizer.count) + self.input_overhead

    def cached(self, req: RecordedRequest) -> tuple[int, int]:
        """``(tokens read, tokens written)`` the :attr:`prompt_cache` reported for ``req`` (``(0, 0)`` without one)."""
        if self.prompt_cache is None:
            return 0, 0
        with self._lock:
            split = self._splits.get(id(req))
            if split is None:
                if req.api == "anthropic":
                    split = self.prompt_cache.anthropic(req.body)
                else:
                    split = (self.prompt_cache.openai(req.body), 0)
                self._splits[id(req)] = split
        return split

    def _input_usage(self, api: str, req: RecordedRequest, n_in: int) -> dict[str, Any]:
        """The usage fields of the input side, as the provider names them (with the cache's split)."""
        if self.prompt_cache is None:
            return {"input_tokens": n_in} if api == "anthropic" else {"prompt_tokens": n_in}
        read, written = self.cached(req)
        if api == "anthropic":
            return {
                "input_tokens": max(0, n_in - read - written),
                "cache_read_input_tokens": read,
                "cache_creation_input_tokens": written,
            }
        return {"prompt_tokens": n_in, "prompt_tokens_details": {"cached_tokens": read}}

    def _usage(self, req: RecordedRequest, text: str) -> tuple[int, int]:
        return self.input_tokens(req), self._tokenizer.count(text)

    def _finish(self, api: str, req: RecordedRequest, text: str) -> tuple[str, str]:
        """The answer cut to ``max_tokens`` (like a real model) and its finish reason."""
        max_tokens = req.max_tokens
        finish = "stop" if api == "openai" else "end_turn"
        if isinstance(max_tokens, int) and self._tokenizer.count(text) > max_tokens:
            from ..tokens import truncate_to_tokens

            text = truncate_to_tokens(text, max_tokens, self._tokenizer)
            finish = "length" if api == "openai" else "max_tokens"
        return text, finish

    def _events(self, api: str, req: RecordedRequest, text: str) -> list[tuple[str | None, Any]]:
        """The server-sent events of a streamed answer: ``(event name, data)`` pairs."""
        model = req.model or self.model
        text, finish = self._finish(api, req, text)
        n_in, n_out = self._usage(req, text)
        # Deltas of a few words each, as providers send them.
        words = re.findall(r"\S+\s*|\s+", text) or [""]
        pieces = ["".join(words[i : i + 3]) for i in range(0, len(words), 3)]
        if api == "openai":
            base = {
                "id": f"chatcmpl-fake-{len(self.requests)}",
                "object": "chat.completion.chunk",
                "created": int(time.time()),
                "model": model,
            }
            out: list[tuple[str | None, Any]] = [
                (
                    None,
                    {
                        **base,
                        "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}],
                    },
                )
            ]
            out += [
                (None, {**base, "choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]})
                for p in pieces
                if p
            ]
            out.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}))
            if (req.body.get("stream_options") or {}).get("include_usage"):
                out.append(
                    (
                        None,
                        {
                            **base,
                            "choices": [],
                            "usage": {
                                **self._input_usage(api, req, n_in),
                                "completion_tokens": n_out,
                                "total_tokens": n_in + n_out,
                            },
                        },
                    )
                )
            out.append((None, "[DONE]"))
            return out
        start: dict[str, Any] = {
            "id": f"msg_fake_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [],
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {**self._input_usage(api, req, n_in), "output_tokens": 1},
        }
        out = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            ("ping", {"type": "ping"}),
        ]
        out += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}},
            )
            for p in pieces
            if p
        ]
        out += [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": finish, "stop_sequence": None},
                    "usage": {"output_tokens": n_out},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]
        return out

    def _tool_answer(self, api: str, req: RecordedRequest, call: ToolCall) -> dict[str, Any]:
        model = req.model or self.model
        n = len(self.requests)
        n_in, n_out = self.input_tokens(req), self._tokenizer.count(call.name) + self._tokenizer.count(call.json)
        if api == "openai":
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_fake_{n}",
                        "type": "function",
                        "function": {"name": call.name, "arguments": call.json},
                    }
                ],
            }
            return {
                "id": f"chatcmpl-fake-{n}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": model,
                "choices": [{"index": 0, "finish_reason": "tool_calls", "message": message}],
                "usage": {
                    **self._input_usage(api, req, n_in),
                    "completion_tokens": n_out,
                    "total_tokens": n_in + n_out,
                },
            }
        return {
            "id": f"msg_fake_{n}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [
                {"type": "tool_use", "id": f"toolu_fake_{n}", "name": call.name, "input": dict(call.arguments)}
            ],
            "stop_reason": "tool_use",
            "stop_sequence": None,
            "usage": {**self._input_usage(api, req, n_in), "output_tokens": n_out},
        }

    def _tool_events(self, api: str, req: RecordedRequest, call: ToolCall) -> list[tuple[str | None, Any]]:
        whole = self._tool_answer(api, req, call)
        pieces = [call.json[i : i + 7] for i in range(0, len(call.json), 7)]
        if api == "openai":
            base = {k: whole[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
            tc = whole["choices"][0]["message"]["tool_calls"][0]
            out: list[tuple[str | None, Any]] = [
                (
                    None,
                    {
                        **base,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": None,
                                "delta": {
                                    "role": "assistant",
                                    "content": None,
                                    "tool_calls": [
                                        {
                                            "index": 0,
                                            "id": tc["id"],
                                            "type": "function",
                                            "function": {"name": call.name, "arguments": ""},
                                        }
                                    ],
                                },
                            }
                        ],
                    },
                )
            ]
            out += [
                (
                    None,
                    {
                        **base,
                        "choices": [
                            {
                                "index": 0,
                                "finish_reason": None,
                                "delta": {"tool_calls": [{"index": 0, "function": {"arguments": p}}]},
                            }
                        ],
                    },
                )
                for p in pieces
            ]
            out.append((None, {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}))
            if (req.body.get("stream_options") or {}).get("include_usage"):
                out.append((None, {**base, "choices": [], "usage": whole["usage"]}))
            return out + [(None, "[DONE]")]
        block = whole["content"][0]
        start = {
            **whole,
            "content": [],
            "stop_reason": None,
            "usage": {**{k: v for k, v in whole["usage"].items() if k != "output_tokens"}, "output_tokens": 1},
        }
        out = [
            ("message_start", {"type": "message_start", "message": start}),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {**block, "input": {}}},
            ),
        ]
        out += [
            (
                "content_block_delta",
                {"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": p}},
            )
            for p in pieces
        ]
        return out + [
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            (
                "message_delta",
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                    "usage": {"output_tokens": whole["usage"]["output_tokens"]},
                },
            ),
            ("message_stop", {"type": "message_stop"}),
        ]

    def _answer(self, api: str, req: RecordedRequest, text: str) -> dict[str, Any]:
        model = req.model or self.model
        text, finish = self._finish(api, req, text)
        n_in, n_out = self._usage(req, text)
        stamp = int(time.time())
        if api == "openai":
            return {
                "id": f"chatcmpl-fake-{len(self.requests)}",
                "object": "chat.completion",
                "created": stamp,
                "model": model,
                "choices": [{"index": 0, "finish_reason": finish, "message": {"role": "assistant", "content": text}}],
                "usage": {
                    **self._input_usage(api, req, n_in),
                    "completion_tokens": n_out,
                    "total_tokens": n_in + n_out,
                },
            }
        return {
            "id": f"msg_fake_{len(self.requests)}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": [{"type": "text", "text": text}],
            "stop_reason": finish,
            "stop_sequence": None,
            "usage": {**self._input_usage(api, req, n_in), "output_tokens": n_out},
        }


def _make_handler(server: FakeLLMServer) -> type[JSONHandler]:
    class Handler(JSONHandler):
        def do_POST(self) -> None:  # the stdlib's naming
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
            failure, text, delay = server._next(req)
            if failure is not None:
                time.sleep(failure.delay_s)
                if failure.status == 0:
                    self.drop_connection()
                    return
                self.send_json(
                    failure.status, {"type": "error", "error": {"type": "api_error", "message": "injected failure"}}
                )
                return
            time.sleep(delay)
            if isinstance(text, ToolCall):
                if body.get("stream"):
                    self.send_events(server._tool_events(api, req, text))
                else:
                    self.send_json(200, server._tool_answer(api, req, text))
                return
            if body.get("stream"):
                self.send_events(server._events(api, req, text or ""))
                return
            self.send_json(200, server._answer(api, req, text or ""))

        def send_events(self, events: list[tuple[str | None, Any]]) -> None:
            """Answer with server-sent events; the connection closes after the last one."""
            self.send_response(200)
            self.send_header("Content-Type", "text/event-stream")
            self.send_header("Cache-Control", "no-cache")
            self.send_header("Connection", "close")
            self.end_headers()
            self.close_connection = True
            for name, data in events:
                payload = data if isinstance(data, str) else json.dumps(data)
                head = f"event: {name}\n" if name else ""
                self.wfile.write(f"{head}data: {payload}\n\n".encode())
                self.wfile.flush()

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
    requests = [
        line.split(":", 1)[1].strip()[:120]
        for line in text.splitlines()
        if line.startswith("[user]:") and len(line) > 8
    ]
    goal = requests[0] if requests else "Continue the task."
    paths = sorted(set(_PATH_RE.findall(text)))[:12]
    done = previous["Progress"] + [f"- [x] {r}" for r in requests[:-1]]
    progress = list(dict.fromkeys(done))[-12:]
    context = list(dict.fromkeys(previous["Critical Context"] + [f"- `{p}`" for p in paths]))[-16:]
    out = [
        "## Goal",
        previous["Goal"][0] if previous["Goal"] else f"- {goal}",
        "",
        "## Constraints & Preferences",
        *(previous["Constraints & Preferences"] or ["- none stated"]),
        "",
        "## Progress",
        "### Done",
        *(progress or ["- [x] nothing yet"]),
        "### In Progress",
        f"- [ ] {requests[-1] if requests else 'current request'}",
        "",
        "## Key Decisions",
        *(previous["Key Decisions"] or ["- none recorded"]),
        "",
        "## Next Steps",
        "1. Continue with the latest request.",
        "",
        "## Critical Context",
        *(context or ["- none"]),
    ]
    return "\n".join(out)
