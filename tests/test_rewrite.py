"""The optional model query rewriter (issue 30): off by default, through the real clients, never fatal.

Every call goes over real HTTP to :class:`stratamem.testing.FakeLLMServer`
through the production OpenAI and Anthropic clients.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from stratamem import Config, Memory
from stratamem.errors import ValidationError
from stratamem.events import Event
from stratamem.ingest import IngestSession
from stratamem.llm import AnthropicChat, OpenAIChat
from stratamem.records import Turn
from stratamem.retrieve.plan import QueryPlan
from stratamem.retrieve.rewrite import ModelRewriter, RuleRewriter
from stratamem.testing import FakeLLMServer

T0 = datetime(2024, 5, 1, 9, 0, tzinfo=UTC)
CONFIG = Config().replace(pyramid={"enabled": False})
QUESTION = "How long was it between those two appointments of mine?"
PLAN = {"shape": "between", "subqueries": ["molar filled at the dentist", "car inspection at the garage"]}
SECRET = "the filter sits behind the left panel"


@pytest.fixture
def server() -> Iterator[FakeLLMServer]:
    with FakeLLMServer(reply=json.dumps(PLAN)) as s:
        yield s


def _model(kind: str, server: FakeLLMServer, **kw: Any) -> OpenAIChat | AnthropicChat:
    kw.setdefault("max_retries", 0)
    kw.setdefault("sleep", lambda s: None)
    if kind == "openai":
        return OpenAIChat("gpt-fake", base_url=server.openai_base_url, **kw)
    return AnthropicChat("claude-fake", base_url=server.anthropic_base_url, **kw)


def _memory(path: Path, rewriter: Any = None) -> Memory:
    mem = Memory(path, namespace="n", config=CONFIG, embedder=None, query_rewriter=rewriter)
    turns = [Turn("user", f"We talked about the garden and the tomatoes again, day {d}.") for d in range(12)]
    mem.add_sessions(
        [
            IngestSession("g", [Turn("user", t.text, timestamp=T0 + timedelta(hours=i)) for i, t in enumerate(turns)]),
            IngestSession(
                "d", [Turn("user", "Yesterday I had a molar filled at the dentist.", timestamp=T0 + timedelta(days=3))]
            ),
            IngestSession(
                "c",
                [
                    Turn(
                        "user",
                        f"The car inspection at the garage went fine; {SECRET}.",
                        timestamp=T0 + timedelta(days=9),
                    )
                ],
            ),
        ]
    )
    return mem


@pytest.mark.parametrize("kind", ["openai", "anthropic"])
def test_a_model_plan_is_searched_and_named_in_the_manifest(kind: str, server: FakeLLMServer, tmp_path: Path) -> None:
    with _memory(tmp_path / "m.db", ModelRewriter(_model(kind, server))) as mem:
        ctx = mem.context(QUESTION, budget=120, policy="recall")
        assert "molar filled at the dentist" in ctx.text and "car inspection at the garage" in ctx.text
        assert (
            "query plan: between (model): sub-queries 'molar filled at the dentist'; 'car inspection at the garage'"
            in ctx.manifest.notes
        )
        index = mem._recall_index()
        hits = index.search(QUESTION, k=2)
        # The question's own best turn is the inspection; the first sub-query places the dentist.
        assert [(index.turn(h.turn_ids[0]).session, h.score.get("subquery")) for h in hits] == [("c", None), ("d", 1.0)]
        assert [index.turn(h.turn_ids[0]).session for h in index.search(QUESTION, k=2, plan=QueryPlan())] == ["c", "g"]
    # Only the question (and no speaker names: none are known) left the process; no stored turn.
    (req,) = server.requests
    sent = json.dumps(req.body)
    assert QUESTION in sent and SECRET not in sent and "tomatoes" not in sent


@pytest.mark.parametrize(
    "answer",
    [
        "Sure! The plan is to look for both appointments.",  # not JSON
        json.dumps({"shape": "sideways", "subqueries": []}),  # unknown shape
        json.dumps({"shape": "list", "subqueries": [f"thing {i}" for i in range(10)]}),  # too many
        json.dumps({"shape": "between", "subqueries": ["a b c d e f g h i j k l m n"]}),  # too long
        json.dumps({"shape": "between", "subqueries": []}),  # a between plan with nothing to search
        json.dumps({"shape": "single", "subqueries": [], "answer": "42 days"}),  # more than asked for
        json.dumps(["between", "x"]),  # not an object
    ],
)
def test_an_answer_that_is_not_a_plan_falls_back_to_the_rules(answer: str, server: FakeLLMServer) -> None:
    server.script(answer)
    failures: list[Exception] = []
    plan = ModelRewriter(_model("openai", server), on_failure=failures.append).plan(QUESTION)
    assert (plan.shape, plan.subqueries, plan.source) == ("single", (), "rules")
    assert plan.note is not None and plan.note.startswith("query rewriter failed (ValueError: ")
    assert len(failures) == 1


def test_a_fenced_json_answer_is_read() -> None:
    with FakeLLMServer(reply="```json\n" + json.dumps(PLAN) + "\n```") as server:
        plan = ModelRewriter(_model("anthropic", server)).plan(QUESTION)
    assert plan == QueryPlan("between", tuple(PLAN["subqueries"]), source="model")


@pytest.mark.parametrize("status", [500, 0])  # a server error, a dropped connection
def test_a_failing_model_never_fails_the_context_and_is_reported(
    status: int, server: FakeLLMServer, tmp_path: Path
) -> None:
    server.fail_next(status=status)
    seen: list[Event] = []
    with _memory(tmp_path / "f.db", ModelRewriter(_model("openai", server))) as mem:
        mem.events.subscribe("recall.rewrite_failed", seen.append)
        ctx = mem.context(QUESTION, budget=120, policy="recall")
        assert ctx.text  # recalled all the same, with the rule plan
        (note,) = [n for n in ctx.manifest.notes if n.startswith("query plan:")]
        assert note.startswith("query plan: single (rules): one ranking — query rewriter failed (ModelError: ")
        assert len(seen) == 1 and seen[0].data["error"].startswith("ModelError: ")
        assert any(w.startswith("recall.rewrite_failed: ModelError") for w in mem.status().warnings)
        # A failure is not cached: the next question asks again, and the model answers this time.
        assert mem._recall_index().plan(QUESTION).source == "model"


def test_a_model_slower_than_its_timeout_falls_back(server: FakeLLMServer) -> None:
    server.delay_next(2.0)
    plan = ModelRewriter(_model("openai", server, timeout_s=0.3)).plan(QUESTION)
    assert plan.source == "rules" and plan.note is not None and "ModelError" in plan.note


def test_the_same_question_costs_one_call_and_the_cache_is_bounded(server: FakeLLMServer) -> None:
    rw = ModelRewriter(_model("openai", server), cache=2)
    assert rw.plan(QUESTION) == rw.plan(QUESTION) and len(server.requests) == 1
    rw.plan("first other question about plants?")
    rw.plan("second other question about plants?")
    rw.plan(QUESTION)  # pushed out by the two newer ones
    assert len(server.requests) == 4 and rw.describe() == {"model": "gpt-fake", "cached": 2}


def test_off_by_default_no_request_reaches_a_model(server: FakeLLMServer, tmp_path: Path) -> None:
    with _memory(tmp_path / "d.db") as mem:
        mem.context(QUESTION, budget=120, policy="recall")
        assert isinstance(mem._recall_index().rewriter, RuleRewriter)
    assert server.requests == []


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValidationError, match="complete"):
        ModelRewriter(object())  # type: ignore[arg-type]
    with pytest.raises(ValidationError, match="max_tokens"):
        ModelRewriter(OpenAIChat("m", base_url="http://127.0.0.1:9/v1"), max_tokens=0)
    with pytest.raises(ValidationError, match="cache"):
        ModelRewriter(OpenAIChat("m", base_url="http://127.0.0.1:9/v1"), cache=-1)
