"""Issue 17 shells: ``stratamem conversation show``, the MCP tool ``conversation_show`` and the
``STRATAMEM_PRUNING_*`` / ``STRATAMEM_COMPACTION_*`` environment overrides."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from test_compaction import SMALL, anthropic_conversation

from stratamem import Memory
from stratamem.agentloop import Compactor
from stratamem.cli import main
from stratamem.cli._env import agentloop_env, apply_agentloop_env
from stratamem.config import Config
from stratamem.errors import ConfigError
from stratamem.llm import OpenAIChat
from stratamem.testing.llm_server import FakeLLMServer, checkpoint_reply

STRATAMEM = str(Path(sys.executable).with_name("stratamem"))


def make_conversation(db: Path) -> dict[str, Any]:
    """A compacted conversation in session 's' (one compaction, one failure, one reported usage)."""
    cfg = Config.from_dict({"pyramid": {"enabled": False}})
    with FakeLLMServer(reply=checkpoint_reply) as server, Memory(db, namespace="agent", config=cfg) as mem:
        model = OpenAIChat("summ", base_url=server.openai_base_url, max_retries=0)
        # A fixed recent window, so the second (failing) compaction still has old turns to summarize.
        fixed = dataclasses.replace(SMALL, keep_recent_turns=0)
        c = Compactor(model, provider="anthropic", memory=mem, session="s", config=fixed)
        msgs = anthropic_conversation(8)
        c.prepare_messages(msgs)
        c.observe_usage(msgs, 5_000, output_tokens=120)
        server.fail_next(1, status=500)
        msgs += anthropic_conversation(8)[:1]
        c.compact(msgs)
        return {"summary": c.state.summary, "failures": c.state.failures}


def test_conversation_show_prints_checkpoint_counts_failures_and_usage(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    made = make_conversation(db)
    runner = CliRunner()
    out = runner.invoke(
        main,
        ["--db", str(db), "-n", "agent", "--embedding", "none", "conversation", "show", "--session", "s", "--json"],
    )
    assert out.exit_code == 0, out.output
    report = json.loads(out.output)
    (conv,) = report["conversations"]
    assert conv["checkpoint"] == made["summary"]
    assert (conv["compaction_count"], conv["failures"], conv["last_status"]) == (1, 1, "fallback")
    assert conv["last_error"].startswith("ModelError")
    assert conv["last_usage"]["input_tokens"] == 5_000 and conv["last_usage"]["output_tokens"] == 120
    text = runner.invoke(main, ["--db", str(db), "-n", "agent", "--embedding", "none", "conversation", "show"])
    assert text.exit_code == 0
    assert "session s: 1 compaction(s), last fallback, 1 failure(s)" in text.output
    assert "last usage: 5,000 in / 120 out" in text.output
    assert "    ## Goal" in text.output
    missing = runner.invoke(
        main, ["--db", str(db), "-n", "agent", "--embedding", "none", "conversation", "show", "--session", "nope"]
    )
    assert missing.exit_code == 1 and "NotFoundError" in missing.output


def test_mcp_conversation_show_over_stdio(tmp_path: Path) -> None:
    db = tmp_path / "m.db"
    made = make_conversation(db)
    env = {
        "STRATAMEM_DB": str(db),
        "STRATAMEM_NAMESPACE": "agent",
        "STRATAMEM_EMBEDDING": "none",
        "PATH": os.environ.get("PATH", ""),
        # A checkout run with PYTHONPATH=src serves its own code, not the installed one.
        **{k: v for k, v in os.environ.items() if k == "PYTHONPATH"},
    }

    async def main_() -> Any:
        async with Client(
            StdioServerParameters(command=STRATAMEM, args=["mcp"], env=env), read_timeout_seconds=60
        ) as client:
            one = await client.call_tool("conversation_show", {"session": "s"})
            every = await client.call_tool("conversation_show", {})
            bad = await client.call_tool("conversation_show", {"session": "zzz"})
            return one, every, bad

    one, every, bad = anyio.run(main_)
    data = json.loads(one.content[0].text)
    assert data["conversations"][0]["checkpoint"] == made["summary"]
    assert data["conversations"][0]["failures"] == 1
    assert [c["session"] for c in json.loads(every.content[0].text)["conversations"]] == ["s"]
    assert bad.is_error and "NotFoundError" in bad.content[0].text


def test_env_overrides_parse_by_type_and_validate() -> None:
    env = {
        "STRATAMEM_COMPACTION_THRESHOLD": "60_000",
        "STRATAMEM_COMPACTION_MIN_GAIN_RATIO": "0.3",
        "STRATAMEM_COMPACTION_HARD_LIMIT": "none",
        "STRATAMEM_PRUNING_ENABLED": "false",
        "STRATAMEM_PRUNING_KEEP_LAST_TOOL_RESULTS": "4",
        "STRATAMEM_DB": "ignored here",
    }
    assert agentloop_env(env) == {
        "compaction": {"hard_limit": None, "min_gain_ratio": 0.3, "threshold": 60_000},
        "pruning": {"enabled": False, "keep_last_tool_results": 4},
    }
    cfg = apply_agentloop_env(Config.from_dict({"compaction": {"threshold": 50_000, "keep_recent_tokens": 9_000}}), env)
    assert (cfg.compaction.threshold, cfg.compaction.keep_recent_tokens) == (60_000, 9_000)  # env over file
    with pytest.raises(ConfigError, match="STRATAMEM_COMPACTION_TRESHOLD"):
        agentloop_env({"STRATAMEM_COMPACTION_TRESHOLD": "1"})
    with pytest.raises(ConfigError, match="STRATAMEM_PRUNING_ENABLED"):
        agentloop_env({"STRATAMEM_PRUNING_ENABLED": "maybe"})
    with pytest.raises(ConfigError, match="must not be negative"):
        apply_agentloop_env(Config(), {"STRATAMEM_PRUNING_SOFT_TRIM_CHARS": "-5"})


def test_the_cli_reads_the_overrides_from_its_environment(tmp_path: Path) -> None:
    yaml = tmp_path / "c.yaml"
    yaml.write_text("compaction:\n  threshold: 50000\n")
    env = {
        **os.environ,
        "STRATAMEM_CONFIG": str(yaml),
        "STRATAMEM_COMPACTION_THRESHOLD": "70000",
        "STRATAMEM_PRUNING_SOFT_TRIM_CHARS": "9000",
        "STRATAMEM_DB": str(tmp_path / "m.db"),
        "STRATAMEM_EMBEDDING": "none",
    }
    code = (
        "from stratamem.cli import Settings; import os; s = Settings(os.environ['STRATAMEM_DB'], 'default', "
        "os.environ['STRATAMEM_CONFIG']); print(s.config.compaction.threshold, s.config.pruning.soft_trim_chars)"
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["70000", "9000"]
    bad = subprocess.run(
        [STRATAMEM, "conversation", "show"],
        env={**env, "STRATAMEM_COMPACTION_NOPE": "1"},
        capture_output=True,
        text=True,
    )
    assert bad.returncode == 1 and "STRATAMEM_COMPACTION_NOPE" in bad.stderr
