"""Importing stratamem never imports an agent framework; each adapter imports only its own."""

from __future__ import annotations

import json
import subprocess
import sys

FRAMEWORKS = ("agents", "langgraph", "langchain", "langchain_core", "llama_index", "pydantic_ai")

# One fresh interpreter (the import checks need one): record which frameworks each import adds.
_SCRIPT = f"""
import json, sys
def loaded():
    return {{m.split('.')[0] for m in sys.modules}} & set({FRAMEWORKS!r})
steps = []
for stmt in ["import stratamem, stratamem.aio, stratamem.integrations",
             "import stratamem.integrations.openai_agents",
             "import stratamem.integrations.pydantic_ai",
             "import stratamem.integrations.langgraph"]:
    before = loaded()
    exec(stmt)
    steps.append(sorted(loaded() - before))
print(json.dumps(steps))
"""


def test_importing_stratamem_imports_no_framework_and_each_adapter_only_its_own() -> None:
    out = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, check=True)
    core, oai, pai, lg = json.loads(out.stdout)
    assert core == []
    assert oai == ["agents"]
    assert pai == ["pydantic_ai"]
    assert "langgraph" in lg and "llama_index" not in lg
