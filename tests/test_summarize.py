"""Summarizers: seed 000's heuristic rule, the local extractive strategy, and the llm strategy
through the real OpenAI client against a fake endpoint on 127.0.0.1."""

from __future__ import annotations

import json
from datetime import datetime, timezone

import pytest

from stratamem.errors import ModelError
from stratamem.llm import OpenAIChat
from stratamem.records import StoredTurn, Turn
from stratamem.summarize import KeyFact, Sentence, Summarizer, Summary, render
from stratamem.summarize.extractive import ExtractiveSummarizer
from stratamem.summarize.heuristic import HeuristicSummarizer
from stratamem.summarize.llm import LLMSummarizer
from stratamem.testing.llm_server import FakeLLMServer
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
T0 = datetime(2024, 5, 1, tzinfo=timezone.utc)


def turns(*specs: tuple[str, str, str]) -> list[StoredTurn]:
    return [StoredTurn(100 + i, "ns", "s", i + 1, TOK.count(text) + 4, Turn(role, text, timestamp=T0, name=name))
            for i, (role, name, text) in enumerate(specs)]


CHAT = turns(
    ("user", "Caroline", "Hey Mel! Good to see you! How have you been?"),
    ("assistant", "Melanie", "Hey Caroline! I'm swamped with the kids and work. What's up with you?"),
    ("user", "Caroline", "I went to an LGBTQ support group yesterday and it was so powerful. "
                         "The transgender stories were inspiring."),
    ("assistant", "Melanie", "Wow, that's cool, Caroline! What happened that was so awesome?"),
    ("user", "Caroline", "I'm planning to study counseling at Ohio State in September 2023. "
                         "I want to help people like me."),
    ("assistant", "Melanie", "That's great. I painted a lake sunrise last year; painting helps me relax."),
    ("user", "Caroline", "Sounds lovely. Thanks for listening."),
)


def test_every_strategy_satisfies_the_protocol():
    assert isinstance(HeuristicSummarizer(TOK), Summarizer)
    assert isinstance(ExtractiveSummarizer(TOK), Summarizer)


def test_heuristic_summary_is_seed_zero_rule_of_the_first_user_requests():
    s = HeuristicSummarizer(TOK).summarize(CHAT, max_tokens=100)
    assert s.text == ("Discussion of: Hey Mel! Good to see you! How have you been?; "
                      "I went to an LGBTQ support group yesterday and it; I'm planning to study counseling at Ohio State in")
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
    words = ["coffee", "tea", "bread", "cheese", "wine", "apples", "honey", "rice", "beans", "flour", "salt",
             "pepper", "olives", "butter", "milk", "eggs", "jam", "nuts", "figs", "dates"]
    cities = ["Paris", "Oslo", "Lima", "Rome", "Kyiv", "Quito", "Seoul", "Accra", "Perth", "Delhi", "Cairo",
              "Doha", "Riga", "Baku", "Bern", "Male", "Apia", "Suva", "Lome", "Minsk"]
    many = turns(*[("user", "Ann", f"{cities[i]} shipped {words[i]} worth {100 + i} euros on May {i + 1}.")
                   for i in range(20)] * 2)
    s = ExtractiveSummarizer(TOK).summarize(many, max_tokens=200)
    assert len(s.key_facts) == 10
    assert all(f.turn_id is not None for f in s.key_facts)
    small = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=200)
    assert 1 <= len(small.key_facts) <= 3
    assert 3 <= len(small.themes) <= 5
    assert "caroline" not in small.themes  # speakers are not themes


def test_extractive_skips_code_and_tool_arguments():
    code = turns(("assistant", "bot", "x = {'a': [1, 2, 3]}; y = f(x) + g(x) * 2 // 3 ** 4 - h[0:9]"),
                 ("user", "Dana", "Please deploy the service to Hetzner on Friday 20 March."))
    s = ExtractiveSummarizer(TOK).summarize(code, max_tokens=100)
    assert [x.turn_id for x in s.sentences] == [101]


def test_extractive_merge_reranks_child_sentences_with_their_turn_ids():
    ex = ExtractiveSummarizer(TOK)
    a = ex.summarize(CHAT[:4], max_tokens=60)
    b = ex.summarize(CHAT[4:], max_tokens=60)
    m = ex.merge([a, b], max_tokens=50, executive=True)
    assert TOK.count(m.text) <= 50
    assert {x.turn_id for x in m.sentences} <= {x.turn_id for x in (*a.sentences, *b.sentences)} | {
        f.turn_id for f in (*a.key_facts, *b.key_facts)}
    assert m.executive is not None and m.executive.split(": ", 1)[1] in m.text


def test_summary_round_trips_through_its_dict_form():
    s = ExtractiveSummarizer(TOK).summarize(CHAT, max_tokens=80)
    assert Summary.from_dict(json.loads(json.dumps(s.to_dict()))) == s


# --- llm strategy through the real client ---------------------------------------------------

GOOD = json.dumps({"summary": "Caroline plans to study counseling; Melanie paints.",
                   "key_facts": [{"fact": "Caroline will study counseling at Ohio State", "turn": 104},
                                 {"fact": "invented", "turn": 999}],
                   "themes": ["Counseling", "painting", "family"]})


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
    reply = json.dumps({"summary": "All parts.", "key_facts": [], "themes": ["a", "b", "c"],
                        "executive": "They planned the launch."})
    with FakeLLMServer(reply=reply) as server:
        model = OpenAIChat("m", base_url=server.openai_base_url, max_retries=0)
        llm = LLMSummarizer(model, TOK)
        parts = [Summary("part one", key_facts=(KeyFact("x", 101),)), Summary("part two")]
        assert llm.merge(parts, max_tokens=50, executive=True).executive == "They planned the launch."
        assert llm.merge(parts, max_tokens=50).executive is None
