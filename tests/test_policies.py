"""Context policies come from one registry: every shell offers exactly its names, Config included."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client

from stratamem import Config, ConfigError, Memory, ValidationError
from stratamem.cli import main
from stratamem.cli.core import context as context_command
from stratamem.context import POLICIES, Policy, get_policy, policy_names, register
from stratamem.context.policies import StateFirstPolicy, unregister
from stratamem.mcp import build_server
from stratamem.web.models import ContextRequest

BUILT_IN = ("hybrid", "topics", "pyramid", "state_first", "recall")


@pytest.fixture
def memory(tmp_path: Path) -> Memory:
    mem = Memory(tmp_path / "p.db", namespace="pol", embedder=None)
    mem.add(
        [
            {"role": "user", "content": "The deploy command is make deploy."},
            {"role": "assistant", "content": "Noted: make deploy."},
        ],
        session="s1",
    )
    return mem


def _mcp_policy_enum(mem: Memory) -> list[str]:
    async def body() -> Any:
        async with Client(build_server(mem), read_timeout_seconds=60) as client:
            return {t.name: t for t in (await client.list_tools()).tools}["get_context"].input_schema

    schema = anyio.run(body)
    [choice] = [s for s in schema["properties"]["policy"]["anyOf"] if s.get("type") == "string"]
    return choice["enum"]


def _cli_choices() -> tuple[str, ...]:
    [option] = [p for p in context_command.params if p.name == "policy"]
    return tuple(option.type.choices)  # type: ignore[attr-defined]


def _web_enum() -> list[str]:
    [choice] = [
        s for s in ContextRequest.model_json_schema()["properties"]["policy"]["anyOf"] if s.get("type") == "string"
    ]
    return choice["enum"]


def test_the_registry_holds_the_five_policies_in_order() -> None:
    assert policy_names() == BUILT_IN
    assert tuple(POLICIES) == BUILT_IN
    assert all(isinstance(p, Policy) and p.name == n and p.description for n, p in POLICIES.items())


def test_every_shell_accepts_exactly_the_registered_policies(memory: Memory) -> None:
    names = policy_names()
    assert _cli_choices() == names
    assert _web_enum() == list(names)
    assert _mcp_policy_enum(memory) == list(names)
    for name in names:
        assert Config.from_dict({"context": {"policy": name}}).context.policy == name
        assert memory.context("deploy command", budget=300, policy=name).manifest.policy == name


def test_config_accepts_recall_from_a_yaml_file_the_cli_reads(tmp_path: Path, memory: Memory) -> None:
    # Before the registry, Config refused ``recall`` while every shell offered it.
    cfg = tmp_path / "c.yaml"
    cfg.write_text("context:\n  policy: recall\n")
    assert Config.from_yaml(cfg).context.policy == "recall"
    memory.close()
    result = CliRunner().invoke(
        main,
        [
            "--db",
            str(tmp_path / "p.db"),
            "--namespace",
            "pol",
            "--config",
            str(cfg),
            "--embedding",
            "none",
            "context",
            "deploy command",
            "--json",
        ],
        catch_exceptions=False,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["manifest"]["policy"] == "recall"
    assert not any(i["reason"] == "recent_window" for i in out["manifest"]["items"])


def test_an_unknown_policy_is_refused_with_the_list_of_names(memory: Memory) -> None:
    listed = "hybrid, topics, pyramid, state_first, recall"
    with pytest.raises(ConfigError) as info:
        Config.from_dict({"context": {"policy": "newest"}})
    assert str(info.value) == f"context.policy: 'newest' is not one of {listed}"
    with pytest.raises(ValidationError) as err:
        memory.context("x", policy="newest")
    assert str(err.value) == f"unknown policy 'newest' (expected one of {listed})"
    with pytest.raises(ValidationError, match="unknown policy"):
        get_policy("newest")
    result = CliRunner().invoke(main, ["--db", str(memory.store.path), "context", "--policy", "newest"])
    assert result.exit_code == 2 and "'newest' is not one of" in result.output


def test_a_policy_registered_in_context_reaches_config_the_api_and_a_new_mcp_server(memory: Memory) -> None:
    class Focus(StateFirstPolicy):
        name = "focus"
        description = "state_first under another name (a test policy)"

    register(Focus())
    try:
        assert policy_names() == (*BUILT_IN, "focus")
        assert Config.from_dict({"context": {"policy": "focus"}}).context.policy == "focus"
        ctx = memory.context("deploy command", budget=300, policy="focus")
        assert ctx.manifest.policy == "focus"
        assert ctx.text == memory.context("deploy command", budget=300, policy="state_first").text
        # The MCP schema is built per server from the registry (the CLI's and the web's at import).
        assert _mcp_policy_enum(memory) == [*BUILT_IN, "focus"]
    finally:
        unregister("focus")
    assert policy_names() == BUILT_IN
    with pytest.raises(ConfigError):
        Config.from_dict({"context": {"policy": "focus"}})


def test_register_refuses_a_taken_or_empty_name_and_built_ins_stay() -> None:
    class Again(StateFirstPolicy):
        name = "hybrid"

    class Nameless(Policy):
        pass

    with pytest.raises(ValidationError, match="already registered"):
        register(Again())
    with pytest.raises(ValidationError, match="identifier"):
        register(Nameless())
    with pytest.raises(ValidationError, match="built in"):
        unregister("recall")
    assert policy_names() == BUILT_IN
