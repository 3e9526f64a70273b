"""OpenAIChat and AnthropicChat through the official client libraries against FakeLLMServer."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from stratamem.errors import ConfigError, ModelError, ValidationError
from stratamem.llm import AnthropicChat, ChatModel, Completion, OpenAIChat
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply
from stratamem.tokens import get_tokenizer

HELLO = [{"role": "user", "content": "Say hello to the build server."}]


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply="hello there") as s:
        yield s


def make(kind: str, server: FakeLLMServer, **kw: object) -> OpenAIChat | AnthropicChat:
    sleeps: list[float] = []
    kw.setdefault("sleep", sleeps.append)
    if kind == "openai":
        model: OpenAIChat | AnthropicChat = OpenAIChat("gpt-fake", base_url=server.openai_base_url, **kw)  # type: ignore[arg-type]
    else:
        model = AnthropicChat("claude-fake", base_url=server.anthropic_base_url, **kw)  # type: ignore[arg-type]
    model.sleeps = sleeps  # type: ignore[union-attr]
    return model


KINDS = ["openai", "anthropic"]


@pytest.mark.parametrize("kind", KINDS)
def test_client_returns_text_and_exact_usage(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server)
    out = model.complete("Be brief.", HELLO, max_tokens=50)
    tok = get_tokenizer("o200k_base")
    assert isinstance(model, ChatModel)
    # Request frame 5 + system (message frame 4 + text) + one message (4 + text): the documented fake costs.
    expected_in = 5 + 4 + tok.count("Be brief.") + 4 + tok.count(HELLO[0]["content"])
    assert out == Completion(
        "hello there", expected_in, tok.count("hello there"), model.model, "stop" if kind == "openai" else "end_turn", 1
    )
    req = server.requests[0]
    assert req.api == kind
    assert req.system == "Be brief."
    assert req.messages == HELLO
    assert req.max_tokens == 50


@pytest.mark.parametrize("kind", KINDS)
def test_transient_failures_are_retried_with_exponential_backoff(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server, max_retries=3, backoff_s=0.25)
    server.fail_next(2, status=503)
    out = model.complete("", HELLO, max_tokens=10)
    assert out.text == "hello there"
    assert out.attempts == 3
    assert model.sleeps == [0.25, 0.5]  # type: ignore[union-attr]
    assert len(server.requests) == 3


@pytest.mark.parametrize("kind", KINDS)
def test_exhausted_retries_raise_model_error(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server, max_retries=1, backoff_s=0.0)
    server.fail_next(2, status=500)
    with pytest.raises(ModelError, match=r"after 2 attempt\(s\): HTTP 500"):
        model.complete("", HELLO, max_tokens=10)
    assert len(server.requests) == 2


@pytest.mark.parametrize("kind", KINDS)
def test_client_errors_are_not_retried(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server, max_retries=3)
    server.fail_next(1, status=400)
    with pytest.raises(ModelError, match="HTTP 400"):
        model.complete("", HELLO, max_tokens=10)
    assert len(server.requests) == 1
    assert model.sleeps == []  # type: ignore[union-attr]


@pytest.mark.parametrize("kind", KINDS)
def test_timeout_becomes_model_error(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server, timeout_s=0.2, max_retries=0)
    server.delay_next(1.0)
    with pytest.raises(ModelError, match="Timeout"):
        model.complete("", HELLO, max_tokens=10)


@pytest.mark.parametrize("kind", KINDS)
def test_dropped_connection_is_retried(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server, max_retries=1, backoff_s=0.0)
    server.fail_next(1, status=0)
    assert model.complete("", HELLO, max_tokens=10).attempts == 2


@pytest.mark.parametrize("kind", KINDS)
def test_empty_answer_is_a_model_error(kind: str, server: FakeLLMServer) -> None:
    model = make(kind, server)
    server.script("   ")
    with pytest.raises(ModelError, match="empty answer"):
        model.complete("", HELLO, max_tokens=10)


@pytest.mark.parametrize("kind", KINDS)
def test_server_honours_max_tokens_and_reports_length(kind: str, server: FakeLLMServer) -> None:
    server.script("one two three four five six seven eight nine ten")
    out = make(kind, server).complete("", HELLO, max_tokens=3)
    assert out.output_tokens == 3
    assert out.finish_reason == ("length" if kind == "openai" else "max_tokens")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(
    "bad, where",
    [
        ({"system": 3}, "system"),
        ({"messages": []}, "messages"),
        ({"messages": [{"role": "tool", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "assistant", "content": "x"}]}, "messages[0]"),
        ({"messages": [{"role": "user", "content": ["x"]}]}, "messages[0].content"),
        ({"max_tokens": 0}, "max_tokens"),
        ({"messages": [{"role": "user", "content": "x" * 101}]}, "messages"),
    ],
)
def test_bad_input_is_refused_before_any_call(kind: str, bad: dict, where: str, server: FakeLLMServer) -> None:
    model = make(kind, server, max_input_chars=100)
    args = {"system": "", "messages": HELLO, "max_tokens": 5, **bad}
    with pytest.raises(ValidationError) as info:
        model.complete(args["system"], args["messages"], max_tokens=args["max_tokens"])
    assert info.value.path == where
    assert server.requests == []


def test_official_endpoints_need_an_explicit_key() -> None:
    with pytest.raises(ConfigError, match="api_key"):
        OpenAIChat("gpt-4o")
    with pytest.raises(ConfigError, match="api_key"):
        AnthropicChat("claude-sonnet")


def test_api_key_is_sent_as_given(server: FakeLLMServer) -> None:
    OpenAIChat("m", base_url=server.openai_base_url, api_key="sk-test").complete("", HELLO, max_tokens=5)
    AnthropicChat("m", base_url=server.url, api_key="ak-test").complete("", HELLO, max_tokens=5)
    assert server.requests[0].headers["authorization"] == "Bearer sk-test"
    assert server.requests[1].headers["authorization"] == "Bearer ak-test"  # anthropic 2.x sends a bearer token


def test_input_overhead_shifts_reported_usage(server: FakeLLMServer) -> None:
    model = make("openai", server)
    base = model.complete("", HELLO, max_tokens=5).input_tokens
    server.input_overhead = 7
    assert model.complete("", HELLO, max_tokens=5).input_tokens == base + 7  # type: ignore[operator]


def test_checkpoint_reply_has_every_section_and_keeps_previous_lines() -> None:
    with FakeLLMServer(reply=checkpoint_reply) as s:
        model = OpenAIChat("m", base_url=s.openai_base_url)
        first = model.complete(
            "", [{"role": "user", "content": "[user]: fix src/app/main.py\n\n[assistant]: ok"}], max_tokens=500
        ).text
        second = model.complete(
            "",
            [
                {
                    "role": "user",
                    "content": "## Previous checkpoint\n" + first + "\n\n# New messages\n[user]: now tests/test_x.py",
                }
            ],
            max_tokens=500,
        ).text
    for section in (
        "## Goal",
        "## Constraints & Preferences",
        "## Progress",
        "### Done",
        "### In Progress",
        "## Key Decisions",
        "## Next Steps",
        "## Critical Context",
    ):
        assert section in first
    assert "- `src/app/main.py`" in second and "- `tests/test_x.py`" in second
    assert "- fix src/app/main.py" in second
