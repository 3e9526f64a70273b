"""The shells build the models the configuration names, and the library uses them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from stratamem import Config, ConfigError
from stratamem.cli import main
from stratamem.cli._build import build_chat_model, build_embedding_model, build_summarizer
from stratamem.llm import AnthropicChat, OpenAIChat
from stratamem.testing.llm_server import FakeLLMServer
from stratamem.tokens import get_tokenizer

SUMMARY = json.dumps(
    {
        "summary": "Dana chose SQLite in WAL mode for the order service.",
        "key_facts": [{"fact": "The order service uses SQLite in WAL mode.", "turn": 1}],
        "themes": ["database", "sqlite", "orders"],
    }
)


def test_llm_summarizer_comes_from_config_and_writes_the_summaries(tmp_path: Path) -> None:
    with FakeLLMServer(reply=SUMMARY) as server:
        cfg = tmp_path / "cfg.yaml"
        cfg.write_text(
            "pyramid:\n  summarizer: llm\n  summarization_model: small-summarizer\n  micro_chunk_size: 2\n"
            "  defer_summarization: false\n"
            f"llm:\n  provider: openai\n  model: big-chat\n  base_url: {server.openai_base_url}\n"
        )
        db = str(tmp_path / "s.db")
        runner = CliRunner()
        for text in ("Which database?", "SQLite in WAL mode."):
            res = runner.invoke(
                main,
                ["--db", db, "--config", str(cfg), "--embedding", "none", "add", "-c", text],
                env={"OPENAI_API_KEY": "test-key"},
                catch_exceptions=False,
            )
            assert res.exit_code == 0, res.output
        res = runner.invoke(
            main,
            ["--db", db, "--config", str(cfg), "--embedding", "none", "nodes", "--level", "1"],
            catch_exceptions=False,
        )
        nodes = json.loads(res.output)
        assert [n["summary"]["text"] for n in nodes if n["level"] == 1] == [
            "Dana chose SQLite in WAL mode for the order service."
        ]
        assert {r.model for r in server.requests} == {"small-summarizer"}


def test_chat_model_builders_follow_the_provider() -> None:
    base = "http://127.0.0.1:9/v1"
    assert build_chat_model(Config()) is None
    oa = build_chat_model(Config.from_dict({"llm": {"provider": "openai", "model": "m", "base_url": base}}))
    assert isinstance(oa, OpenAIChat) and oa.model == "m"
    an = build_chat_model(Config.from_dict({"llm": {"provider": "anthropic", "model": "c", "base_url": base}}))
    assert isinstance(an, AnthropicChat) and an.model == "c"
    with pytest.raises(ConfigError, match="llm.model is required"):
        build_chat_model(Config.from_dict({"llm": {"provider": "openai"}}))
    with pytest.raises(ConfigError, match="llm.provider is not set"):
        build_summarizer(Config.from_dict({"pyramid": {"summarizer": "llm"}}), get_tokenizer())
    assert build_summarizer(Config(), get_tokenizer()) is None


def test_embedding_builders_follow_the_provider() -> None:
    assert build_embedding_model(Config.from_dict({"embedding": {"provider": "none"}})) is None
    assert build_embedding_model(Config()).name == "all-MiniLM-L6-v2"
    with pytest.raises(ConfigError, match="embedding.dimensions is required"):
        build_embedding_model(Config.from_dict({"embedding": {"provider": "openai", "model": "e"}}))
