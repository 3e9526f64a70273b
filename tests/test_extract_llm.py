"""The model-powered extractor behind the offline one's interface, through the real OpenAI and Anthropic
clients against the fake server: structured output, checked answers, batching per group of segments,
spend in the namespace's accounting, and a visible fallback to the offline rules that loses no turn."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stratamem import Config, Memory
from stratamem.errors import ConfigError
from stratamem.items.extract_llm import SCHEMA, LLMExtractor
from stratamem.llm import AnthropicChat, OpenAIChat
from stratamem.testing.llm_server import FakeLLMServer
from stratamem.tokens import get_tokenizer

T0 = datetime(2024, 3, 4, 9, 0, tzinfo=UTC)
TURNS = [
    ("user", "Hi! Quick one before we start."),
    ("assistant", "Sure, go ahead."),
    ("user", "We moved to Lisbon last month, and I prefer the Lisbon office for every meeting from now on."),
    ("assistant", "Noted, Lisbon it is."),
]


def _answer(first: int) -> dict[str, Any]:
    """What a good model says about TURNS stored from turn id ``first``: two items, and one naming an unshown turn."""
    return {
        "items": [
            {
                "turn": first + 2,
                "text": "The user moved to Lisbon in February 2024.",
                "type": "event",
                "subject": "user",
                "attribute": "residence",
                "value": "Lisbon",
                "when": "2024-02-01",
                "salience": 0.95,
            },
            {
                "turn": first + 2,
                "text": "Plans should use the Lisbon office.",
                "type": "decision",
                "subject": "user",
                "attribute": None,
                "value": None,
                "when": None,
                "salience": 0.8,
            },
            {
                "turn": 999,
                "text": "Not from this conversation.",
                "type": "fact",
                "subject": "x",
                "attribute": None,
                "value": None,
                "when": None,
                "salience": 0.5,
            },
            {
                "turn": first,
                "text": "Says hi.",
                "type": "greeting",
                "subject": "user",
                "attribute": None,
                "value": None,
                "when": None,
                "salience": 0.1,
            },
        ]
    }


def _memory(path: Path, model: Any, **pyramid: Any) -> Memory:
    config = Config().replace(
        items={"extractor": "llm"}, pyramid={"defer_summarization": False, "micro_chunk_size": 4, **pyramid}
    )
    return Memory(path, namespace="n", config=config, embedder=None, extractor=LLMExtractor(model, get_tokenizer()))


def _add(mem: Memory, session: str = "s", day: int = 0) -> list[int]:
    stored = mem.add(
        [
            {"role": role, "content": text, "timestamp": (T0 + timedelta(days=day, minutes=i)).isoformat()}
            for i, (role, text) in enumerate(TURNS)
        ],
        session=session,
    )
    return [t.id for t in stored]


def test_openai_structured_output_gives_typed_items_with_their_turns_and_spend(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.reply = lambda req: json.dumps(_answer(1))
        mem = _memory(tmp_path / "o.db", OpenAIChat("m", base_url=server.openai_base_url, max_retries=0))
        _add(mem)
        items = mem.items.list()
        assert [(i.content, i.type, i.provenance, i.salience, i.key, i.valid_from) for i in items] == [
            (
                "The user moved to Lisbon in February 2024.",
                "event",
                (3,),
                0.95,
                "user:residence",
                datetime(2024, 2, 1, tzinfo=UTC),
            ),
            ("Plans should use the Lisbon office.", "decision", (3,), 0.8, None, T0 + timedelta(minutes=2)),
        ]
        (req,) = server.requests
        fmt = req.body["response_format"]
        assert (fmt["type"], fmt["json_schema"]["name"], fmt["json_schema"]["strict"]) == (
            "json_schema",
            "memory_items",
            True,
        )
        assert fmt["json_schema"]["schema"] == SCHEMA
        assert "[3] user (2024-03-04): We moved to Lisbon last month" in req.messages[0]["content"]
        status = mem.status()
        assert (status.extract_calls, status.extract_input_tokens, status.extract_output_tokens) == (
            1,
            server.input_tokens(req),
            get_tokenizer().count(json.dumps(_answer(1))),
        )


def test_anthropic_gets_one_forced_tool_and_its_input_is_the_answer(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.script_tool_call("memory_items", _answer(1))
        mem = _memory(tmp_path / "a.db", AnthropicChat("m", base_url=server.anthropic_base_url, max_retries=0))
        _add(mem)
        assert [i.content for i in mem.items.list()] == [
            "The user moved to Lisbon in February 2024.",
            "Plans should use the Lisbon office.",
        ]
        (req,) = server.requests
        assert req.body["tool_choice"] == {"type": "tool", "name": "memory_items"}
        assert [t["name"] for t in req.body["tools"]] == ["memory_items"]
        assert req.body["tools"][0]["input_schema"] == SCHEMA
        assert mem.status().extract_calls == 1


@pytest.mark.parametrize("failure", ["not json", "http 500"])
def test_a_failed_extraction_falls_back_to_the_rules_visibly_and_keeps_every_turn(tmp_path: Path, failure: str) -> None:
    with FakeLLMServer(reply="I would rather chat about the weather.") as server:
        if failure == "http 500":
            server.fail_next(5, status=500)
        mem = _memory(tmp_path / "f.db", OpenAIChat("m", base_url=server.openai_base_url, max_retries=0))
        events: list[Any] = []
        mem.events.subscribe("items.extract_failed", events.append)
        ids = _add(mem)
        assert [t.id for t in mem.turns()] == ids
        assert [(e.data["extractor"], e.data["error"]) for e in events] == [("llm", "ModelError")]
        # The offline rules stood in: a preference stated in so many words is kept.
        assert [(i.content, i.type) for i in mem.items.list()] == [
            (
                "user: We moved to Lisbon last month, and I prefer the Lisbon office for every meeting from now on.",
                "event",
            )
        ]
        status = mem.status()
        assert (status.extract_failures, status.extract_calls) == (1, 0 if failure == "http 500" else 1)
        node = mem.pyramid.nodes(level=1)[0]
        assert node.summary_status == "ok"  # a good summary is not marked failed by its extraction


def test_segments_summarized_together_are_extracted_in_one_call(tmp_path: Path) -> None:
    with FakeLLMServer() as server:
        server.reply = lambda req: json.dumps({"items": []})
        mem = _memory(tmp_path / "b.db", OpenAIChat("m", base_url=server.openai_base_url, max_retries=0))
        # One add of 12 turns seals three 4-turn segments, summarized as one group: one extraction call.
        mem.add(
            [
                {"role": role, "content": text, "timestamp": (T0 + timedelta(days=d, minutes=i)).isoformat()}
                for d in range(3)
                for i, (role, text) in enumerate(TURNS)
            ],
            session="s",
        )
        assert len(mem.pyramid.nodes(level=1)) == 3
        assert len(server.requests) == 1
        assert server.requests[0].messages[0]["content"].count("\n") == 3 * len(TURNS) - 1
        assert mem.status().extract_calls == 1


def test_a_model_without_structured_output_gets_the_schema_in_its_instructions(tmp_path: Path) -> None:
    class Plain:
        """A ChatModel of the user's own, without complete_json."""

        model = "plain"

        def __init__(self, inner: OpenAIChat) -> None:
            self.inner = inner

        def complete(self, system: str, messages: Any, *, max_tokens: int) -> Any:
            return self.inner.complete(system, messages, max_tokens=max_tokens)

    with FakeLLMServer() as server:
        server.reply = lambda req: "Here you go: " + json.dumps(_answer(1))
        mem = _memory(tmp_path / "p.db", Plain(OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)))
        _add(mem)
        assert len(mem.items.list()) == 2
        assert "response_format" not in server.requests[0].body
        assert "JSON schema of the answer" in server.requests[0].system


def test_the_llm_extractor_must_be_passed_in_not_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="pass extractor=LLMExtractor"):
        Memory(tmp_path / "x.db", config=Config().replace(items={"extractor": "llm"}), embedder=None)
