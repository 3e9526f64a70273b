"""Importing stratamem never imports an agent framework; each adapter imports only its own."""

from __future__ import annotations

import subprocess
import sys

FRAMEWORKS = ("agents", "langgraph", "langchain", "langchain_core", "llama_index", "pydantic_ai")


def _loaded_after(statement: str) -> list[str]:
    code = (f"import sys; {statement}; "
            f"print(sorted({{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return eval(out.stdout)  # noqa: S307 - our own printed list literal


def test_importing_stratamem_imports_no_framework() -> None:
    assert _loaded_after("import stratamem, stratamem.aio, stratamem.integrations") == []


def test_each_adapter_imports_only_its_framework() -> None:
    assert _loaded_after("import stratamem.integrations.openai_agents") == ["agents"]
    assert "llama_index" not in _loaded_after("import stratamem.integrations.langgraph")
    assert _loaded_after("import stratamem.integrations.pydantic_ai") == ["pydantic_ai"]
