"""Summarizers: seed 000's heuristic rule, the local extractive strategy, and the llm strategy
through the real OpenAI client against a fake endpoint on 127.0.0.1."""

from __future__ import annotations

import json
from collections import Counter
from datetime import UTC, datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.errors import ModelError
from stratamem.llm import OpenAIChat
from stratamem.records import KeyFact, Sentence, StoredTurn, Summary, TextBlock, ToolResultBlock, ToolUseBlock, Turn
from stratamem.records.summaries import render
from stratamem.summarize import Summarizer
from stratamem.summarize._text import fit_text
from stratamem.summarize._units import actions, prose_sentences
from stratamem.summarize.extractive import ExtractiveSummarizer
from stratamem.summarize.heuristic import HeuristicSummarizer
from stratamem.summarize.llm import LLMSummarizer
from stratamem.testing.llm_server import FakeLLMServer
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
T0 = datetime(2024, 5, 1, tzinfo=UTC)


def turns(*specs: tuple[str, str, str]) -> list[StoredTurn]:
    return [
        StoredTurn(100 + i, "ns", "s", i + 1, TOK.count(text) + 4, Turn(role, text, timestamp=T0, name=name))
        for i, (role, name, text) in enumerate(specs)
    ]


CHAT = turns(
    ("user", "Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("assistant", "Melanie", "Hey Caroline! I'm swamped with the kids and work. What's up with you?"),
    (
        "user",
        "Caroline",
        "I went to an LGBTQ support group yesterday and it was so powerful. The transgender stories were inspiring.",
    ),
    ("assistant", "Melanie", "Wow, that's cool, Caroline! What happened that was so awesome?"),
    (
        "user",
        "Caroline",
        "I'm planning to study counseling at Ohio State in September 2023. I want to help people like me.",
    ),
    ("assistant", "Melanie", "That's great. I painted a lake sunrise last year; painting helps me relax."),
    ("user", "Caroline", "Sounds lovely. Thanks for listening."),
)


def test_every_strategy_satisfies_the_protocol():
    assert isinstance(HeuristicSummarizer(TOK), Summarizer)
    assert isinstance(ExtractiveSummarizer(TOK), Summarizer)


def test_heuristic_summary_is_seed_zero_rule_of_the_first_user_requests():
    s = HeuristicSummarizer(TOK).summarize(CHAT, max_tokens=100)
    assert s.text == (
        "Discussion of: Hey Mel! Good to see you! How have you been?; "
        "I went to an LGBTQ support group yesterday and it; I'm planning to study counseling at Ohio State in"
    )
    assert s.key_facts == ()
    assert s.summarizer == "heuristic"
    assert 3 <= len(s.themes) <= 5


def test_heuristic_without_user_turns_describes_the_segment():
    s = HeuristicSummarizer(TOK).summarize(CHAT[1:2], max_tokens=50)
    assert s.text == "Conversation segment (1 turns)"


def test_extractive_keeps_source_turn_ids_and_the_budget():
    s = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=60)
    assert TOK.count(s.text) <= 60
    assert s.sentences, "at least one sentence fits"
    by_id = {t.id: t for t in CHAT}
    for sent in s.sentences:
        speaker, body = sent.text.split(": ", 1)
        assert body in by_id[sent.turn_id].text
        assert speaker == by_id[sent.turn_id].turn.name
    assert s.text == render(s.sentences)


def test_extractive_prefers_sentences_with_names_numbers_and_dates():
    s = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=20)
    assert [x.turn_id for x in s.sentences] == [104]
    assert "Ohio State in September 2023" in s.text
    assert "Thanks for listening" not in ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=80).text


def test_extractive_key_facts_are_few_sourced_and_at_most_ten():
    words = [
        "coffee",
        "tea",
        "bread",
        "cheese",
        "wine",
        "apples",
        "honey",
        "rice",
        "beans",
        "flour",
        "salt",
        "pepper",
        "olives",
        "butter",
        "milk",
        "eggs",
        "jam",
        "nuts",
        "figs",
        "dates",
    ]
    cities = [
        "Paris",
        "Oslo",
        "Lima",
        "Rome",
        "Kyiv",
        "Quito",
        "Seoul",
        "Accra",
        "Perth",
        "Delhi",
        "Cairo",
        "Doha",
        "Riga",
        "Baku",
        "Bern",
        "Male",
        "Apia",
        "Suva",
        "Lome",
        "Minsk",
    ]
    many = turns(
        *[("user", "Ann", f"{cities[i]} shipped {words[i]} worth {100 + i} euros on May {i + 1}.") for i in range(20)]
        * 2
    )
    s = ExtractiveSummarizer(TOK).summarize(many, max_tokens=200)
    assert len(s.key_facts) == 10
    assert all(f.turn_id is not None for f in s.key_facts)
    small = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=200)
    assert 1 <= len(small.key_facts) <= 3
    assert 3 <= len(small.themes) <= 5
    assert "caroline" not in small.themes  # speakers are not themes


def test_extractive_skips_code_and_tool_arguments():
    code = turns(
        ("assistant", "bot", "x = {'a': [1, 2, 3]}; y = f(x) + g(x) * 2 // 3 ** 4 - h[0:9]"),
        ("user", "Dana", "Please deploy the service to Hetzner on Friday 20 March."),
    )
    s = ExtractiveSummarizer(TOK).summarize(code, max_tokens=100)
    assert [x.turn_id for x in s.sentences] == [101]


def test_extractive_merge_reranks_child_sentences_with_their_turn_ids():
    ex = ExtractiveSummarizer(TOK)
    a = ex.summarize(CHAT[:4], max_tokens=60)
    b = ex.summarize(CHAT[4:], max_tokens=60)
    m = ex.merge([a, b], max_tokens=50, executive=True)
    assert TOK.count(m.text) <= 50
    assert {x.turn_id for x in m.sentences} <= {x.turn_id for x in (*a.sentences, *b.sentences)} | {
        f.turn_id for f in (*a.key_facts, *b.key_facts)
    }
    assert m.executive is not None and m.executive.split(": ", 1)[1] in m.text


def test_summary_round_trips_through_its_dict_form():
    s = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=80)
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


# --- llm strategy through the real client ---------------------------------------------------

GOOD = json.dumps(
    {
        "summary": "Caroline plans to study counseling; Melanie paints.",
        "key_facts": [
            {"fact": "Caroline will study counseling at Ohio State", "turn": 104},
            {"fact": "invented", "turn": 999},
        ],
        "themes": ["Counseling", "painting", "family"],
    }
)


def test_llm_summarizer_parses_the_model_json_and_checks_turn_ids():
    with FakeLLMServer(reply=GOOD) as server:
        model = OpenAIChat("summarizer-model", base_url=server.openai_base_url, max_retries=0)
        s = LLMSummarizer(model, TOK).summarize(CHAT, max_tokens=80)
        assert s.text == "Caroline plans to study counseling; Melanie paints."
        assert s.key_facts == (KeyFact("Caroline will study counseling at Ohio State", 104), KeyFact("invented", None))
        assert s.themes == ("counseling", "painting", "family")
        assert s.summarizer == "llm"
        [req] = server.requests
        assert req.model == "summarizer-model"
        assert "[104] Caroline: I'm planning to study counseling" in req.prompt_text


def test_llm_summarizer_splits_input_larger_than_its_bound():
    big = turns(*[("user", "Ann", f"Statement number {i} about the harvest of lot {i}. " * 20) for i in range(12)])
    with FakeLLMServer(reply=GOOD) as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        s = LLMSummarizer(model, TOK, max_input_tokens=800).summarize(big, max_tokens=60)
        # 12 turns of ~250 tokens, at most 3 per part: 4 part calls plus one merge call.
        assert len(server.requests) == 5
        assert all(TOK.count(r.prompt_text) < 1400 for r in server.requests)
        assert s.text == "Caroline plans to study counseling; Melanie paints."


def test_llm_summarizer_rejects_an_answer_that_is_not_a_json_summary():
    with FakeLLMServer(reply="Sorry, I cannot help with that.") as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        with pytest.raises(ModelError, match="did not answer with a JSON summary"):
            LLMSummarizer(model, TOK).summarize(CHAT, max_tokens=80)


def test_llm_summarizer_raises_model_error_when_the_endpoint_keeps_failing():
    with FakeLLMServer(reply=GOOD) as server:
        server.fail_next(3, status=503)
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=2, backoff_s=0.0)
        with pytest.raises(ModelError):
            LLMSummarizer(model, TOK).summarize(CHAT, max_tokens=80)
        assert len(server.requests) == 3


def test_llm_merge_asks_for_an_executive_summary_at_the_top():
    reply = json.dumps(
        {"summary": "All parts.", "key_facts": [], "themes": ["a", "b", "c"], "executive": "They planned the launch."}
    )
    with FakeLLMServer(reply=reply) as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        llm = LLMSummarizer(model, TOK)
        parts = [Summary("part one", key_facts=(KeyFact("x", 101),)), Summary("part two")]
        assert llm.merge(parts, max_tokens=50, executive=True).executive == "They planned the launch."
        assert llm.merge(parts, max_tokens=50).executive is None


# --- agent conversations: prose first, tool calls as short mentions ------------------------


def agent_turn(i: int, role: str, content, name: str | None = None) -> StoredTurn:
    return StoredTurn(200 + i, "ns", "s", i + 1, 10, Turn(role, content, timestamp=T0, name=name))


def result(call_id: str, text: str, *, error: bool = False) -> ToolResultBlock:
    return ToolResultBlock(call_id, (TextBlock(text),), is_error=error)


AGENT = [
    agent_turn(0, "system", "You are a coding agent. Tools: read_file, run, search."),
    agent_turn(
        1,
        "user",
        "Checkout fails now and then under load. Can you look at orders/checkout.py and\nrun the tests?",
        "dana",
    ),
    agent_turn(
        2,
        "assistant",
        (
            TextBlock("Reading the checkout first."),
            ToolUseBlock("c1", "read_file", {"path": "orders/checkout.py"}),
            ToolUseBlock("c2", "search", {"pattern": "call_with_retry", "path": "orders/"}),
        ),
    ),
    agent_turn(
        3,
        "tool",
        (
            result(
                "c1",
                "from .retry import call_with_retry\n\ndef checkout(order):\n"
                "    return call_with_retry(lambda: _charge(order))\n",
            ),
        ),
    ),
    agent_turn(
        4,
        "tool",
        (
            result(
                "c2",
                "orders/checkout.py:1:from .retry import call_with_retry\n"
                "orders/payments.py:42:        return call_with_retry(once, self.policy)",
            ),
        ),
    ),
    agent_turn(5, "assistant", (ToolUseBlock("c3", "run", {"command": "pytest -q"}),)),
    agent_turn(
        6,
        "tool",
        (
            result(
                "c3",
                "..F..F.....\n=== FAILURES ===\nE   sqlite3.OperationalError: database is "
                "locked\n2 failed, 9 passed in 0.41s",
            ),
        ),
    ),
    agent_turn(
        7,
        "assistant",
        "Two tests fail with `database is locked`: the checkout retries the whole\n"
        "transaction, so a second order is created and charged.\n\n```python\n"
        "PRAGMA busy_timeout = 5000\n```\n\n- **busy_timeout**: wait up to 5 s for the lock\n"
        "- retry only the payment call, never the whole checkout",
    ),
    agent_turn(
        8,
        "user",
        "OK. We'll keep 3 attempts with a 200 ms base, because Paystream drops about 5 % of "
        "sandbox requests.\nShip the fix by Friday 20 March.",
        "dana",
    ),
    agent_turn(
        9,
        "assistant",
        (ToolUseBlock("c4", "edit_file", {"path": "orders/db.py", "old": "x", "new": "PRAGMA busy_timeout = 5000"}),),
    ),
    agent_turn(10, "tool", (result("c4", "edit_file: old text not found in orders/db.py", error=True),)),
]
DECISION = "dana: We'll keep 3 attempts with a 200 ms base, because Paystream drops about 5 % of sandbox requests."


def test_a_tool_heavy_segment_is_summarized_from_prose_with_short_action_mentions():
    s = ExtractiveSummarizer(TOK).summarize(AGENT, max_tokens=120)
    assert s.text == (
        "dana: Checkout fails now and then under load. assistant: Reading the checkout first. "
        "Ran pytest -q (2 failed, 9 passed). Two tests fail with database is locked: the checkout retries the "
        "whole transaction, so a second order is created and charged. busy_timeout: wait up to 5 s for the lock. "
        "Retry only the payment call, never the whole checkout. dana: We'll keep 3 attempts with a 200 ms base, "
        "because Paystream drops about 5 % of sandbox requests. Ship the fix by Friday 20 March."
    )
    assert TOK.count(s.text) <= 120
    assert [(x.turn_id, x.action) for x in s.sentences] == [
        (201, False),
        (202, False),
        (205, True),
        (207, False),
        (207, False),
        (207, False),
        (208, False),
        (208, False),
    ]
    # No tool output, no code, no tool arguments, no system prompt.
    for leaked in (
        "import",
        "def ",
        "orders/payments.py:42",
        "OperationalError",
        "```",
        "PRAGMA",
        "coding agent",
        "**",
        "`",
    ):
        assert leaked not in s.text


def test_a_small_budget_keeps_the_decision_with_its_number_and_its_turn():
    s = ExtractiveSummarizer(TOK).summarize(AGENT, max_tokens=60)
    assert s.text == (
        "assistant: Ran pytest -q (2 failed, 9 passed). Retry only the payment call, never the whole "
        "checkout. dana: We'll keep 3 attempts with a 200 ms base, because Paystream drops about 5 % "
        "of sandbox requests. Ship the fix by Friday 20 March."
    )
    assert Sentence(DECISION, 208) in s.sentences


def test_key_facts_of_an_agent_segment_are_prose_never_action_mentions_or_questions():
    s = ExtractiveSummarizer(TOK).summarize(AGENT, max_tokens=400)
    assert s.key_facts == (
        KeyFact("assistant: busy_timeout: wait up to 5 s for the lock.", 207),
        KeyFact(DECISION, 208),
        KeyFact("dana: Ship the fix by Friday 20 March.", 208),
    )
    assert s.themes == ("checkout", "fail", "order", "test", "retry")
    # With room for everything, every call is mentioned once, failures included.
    assert [x.text for x in s.sentences if x.action] == [
        "assistant: Read orders/checkout.py; searched call_with_retry (2 hits).",
        "assistant: Ran pytest -q (2 failed, 9 passed).",
        "assistant: Edited orders/db.py (failed: edit_file: old text not found in orders/db.py).",
    ]


def test_hard_wrapped_markdown_becomes_whole_sentences():
    text = (
        "Three things decide the design:\n1. **Idempotency-Key**: a repeated key within 24 h returns the\n"
        "   original response. That makes retries safe.\n2. The sandbox drops about 5 % of requests\n\n"
        "# Heading\n| a | b |\n```\nx = 1\n```\nThe plan is simple, and it\nfits in one sentence.\n"
        "    return call(x);\nDone"
    )
    assert prose_sentences(text) == [
        "Three things decide the design:",
        "Idempotency-Key: a repeated key within 24 h returns the original response.",
        "That makes retries safe.",
        "The sandbox drops about 5 % of requests.",
        "The plan is simple, and it fits in one sentence.",
        "Done.",
    ]


def test_action_mentions_name_the_call_and_only_a_real_outcome():
    turns_ = [
        agent_turn(
            0,
            "assistant",
            (
                ToolUseBlock("a", "read_file", {"path": "tests/report.txt"}),
                ToolUseBlock("b", "bash", {"command": "make lint"}),
                ToolUseBlock("c", "grep", {"pattern": "TODO", "path": "src"}),
                ToolUseBlock("d", "deploy_service", {"target": "staging"}),
            ),
        ),
        agent_turn(
            1,
            "tool",
            (
                result("a", "last run: 3 failed"),
                result("b", "Error: ruff not installed"),
                result("c", ""),
                result("d", "ok"),
            ),
        ),
    ]
    assert actions(turns_) == {
        200: "Read tests/report.txt; ran make lint (failed: Error: ruff not installed); "
        "searched TODO (no hits); called deploy_service staging."
    }
    busy = [
        agent_turn(0, "assistant", tuple(ToolUseBlock(f"r{i}", "read_file", {"path": f"f{i}.py"}) for i in range(6)))
    ]
    assert actions(busy) == {200: "Read f0.py; read f1.py; read f2.py; 3 more calls."}


def test_tool_results_are_not_quoted_or_taken_for_requests():
    turns_ = [
        agent_turn(0, "user", (TextBlock("Please rotate the Paystream token before Friday."),), "dana"),
        agent_turn(1, "assistant", (ToolUseBlock("t1", "run", {"command": "vault read shop/paystream"}),)),
        agent_turn(2, "tool", (result("t1", "Key Value token s3cr3t-abc lease 768h. Everything looks fine here."),)),
        agent_turn(3, "assistant", "The token expires in 32 days, so rotating it now is safe."),
    ]
    s = ExtractiveSummarizer(TOK).summarize(turns_, max_tokens=200)
    assert s.text == (
        "dana: Please rotate the Paystream token before Friday. assistant: Ran vault read "
        "shop/paystream. The token expires in 32 days, so rotating it now is safe."
    )
    assert HeuristicSummarizer(TOK).summarize(turns_, max_tokens=50).text == (
        "Discussion of: Please rotate the Paystream token before Friday"
    )


def test_render_names_each_speaker_once_per_run():
    sents = (
        Sentence("dana: A b.", 1),
        Sentence("dana: C d.", 2),
        Sentence("assistant: E f.", 3, True),
        Sentence("dana: G h.", 4),
        Sentence("Note: free text.", None),
        Sentence("Note: more.", None),
    )
    assert render(sents) == "dana: A b. C d. assistant: E f. dana: G h. Note: free text. Note: more."


def test_summaries_with_action_sentences_round_trip_and_older_dicts_still_load():
    s = ExtractiveSummarizer(TOK).summarize(AGENT, max_tokens=400)
    d = json.loads(json.dumps(s.to_dict()))
    assert "text" not in d and d["rendered"] is True
    assert Summary.from_dict(d) == s
    older = {"sentences": [["dana: A b.", 1], ["dana: C d.", 2]], "key_facts": [0], "themes": []}
    assert Summary.from_dict(older).text == "dana: A b. dana: C d."


texts = st.text(alphabet=st.sampled_from(list("abcdefgh XYZ.,:;!?\n-*`#|0123456789{}()_/")), max_size=120)


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(["user", "assistant", "tool", "system"]), texts, st.booleans()),
        min_size=1,
        max_size=8,
    ),
    st.integers(min_value=8, max_value=120),
)
def test_every_extractive_sentence_keeps_a_turn_of_the_segment_and_the_budget_holds(specs, budget):
    turns_ = []
    for i, (role, text, with_tool) in enumerate(specs):
        if role == "assistant" and with_tool:
            content = (TextBlock(text or "x"), ToolUseBlock(f"c{i}", "run", {"command": text[:20] or "ls"}))
        elif role == "tool":
            content = (result(f"c{i - 1}", text),)
        else:
            content = text or "x"
        turns_.append(agent_turn(i, role, content, "dana" if role == "user" else None))
    s = ExtractiveSummarizer(TOK).summarize(turns_, max_tokens=budget)
    ids = {t.id for t in turns_ if t.role in ("user", "assistant")}
    assert TOK.count(s.text) <= budget
    assert all(x.turn_id in ids for x in s.sentences)
    assert all(f.turn_id in ids for f in s.key_facts)
    assert s.text == (
        render(s.sentences) if s.sentences else fit_text(f"Conversation segment ({len(turns_)} turns)", budget, TOK)
    )


def test_the_bundled_agent_sample_summaries_quote_prose_and_mention_tools_briefly():
    from importlib import resources

    from stratamem import Memory
    from stratamem.ingest import read_file

    mem = Memory(":memory:", namespace="default", embedder=None)
    with resources.as_file(resources.files("stratamem") / "data" / "sample_conversation.jsonl") as path:
        for session in read_file(path):
            mem.add_sessions([session])
    mem.pyramid.summarize_pending(include_hot=True)
    segments = mem.pyramid.nodes(level=1)
    roles = {t.id: t.role for t in mem.turns()}
    # 24 segments of 10 turns, and the last turns of the 5 sessions the next one left quiet (reason idle).
    assert sorted(Counter(n.reason for n in segments).items()) == [("idle", 5), ("size", 24)]
    for node in segments:
        s = node.summary
        assert s.text == render(s.sentences)
        assert {roles[x.turn_id] for x in s.sentences} <= {"user", "assistant"}
        for x in s.sentences:
            body = x.text.split(": ", 1)[1]
            assert "```" not in body and "`" not in body and "**" not in body and "\n" not in body
            assert body[-1] in ".!?…"  # whole sentences
            if x.action:
                assert len(body) <= 200 and KeyFact(x.text, x.turn_id) not in s.key_facts
            else:
                assert "def " not in body and "import " not in body and "self." not in body
        assert "tool: " not in s.text
    # The decision and its numbers survive summarization, with the turn they were made in.
    retry = [x for n in segments for x in n.summary.sentences if "3 attempts, 200 ms base" in x.text]
    assert [(roles[x.turn_id], x.text) for x in retry] == [
        ("user", "dana: Go with it: 3 attempts, 200 ms base, full jitter, 2 s cap, 6 s deadline.")
    ]
