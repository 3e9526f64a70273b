"""Every python example on the docs/integrations pages runs, offline, with the framework's fake model."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parents[1] / "docs" / "integrations"
PAGES = ["async.md", "openai-agents.md", "langgraph.md", "llamaindex.md", "pydantic-ai.md"]
EXPECT = {
    "async.md": ["10\n"],
    "openai-agents.md": ["Sunny in Lisbon.", "You asked about Lisbon.", "turns in stratamem"],
    "langgraph.md": ["'language': 'python'", "a.py is a module of 500 lines.", "['user', 'assistant', 'tool']"],
    "llamaindex.md": ["True\n", "flushed messages stored"],
    "pydantic-ai.md": ["I was sent 1 messages", "'user', 'assistant', 'user', 'assistant'"],
}


@pytest.mark.parametrize("page", PAGES)
def test_page_example_runs(
    page: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    code = "\n".join(re.findall(r"```python\n(.*?)```", (DOCS / page).read_text(), flags=re.S))
    assert code.strip(), f"{page} has no python example"
    monkeypatch.chdir(tmp_path)  # the examples write their database in the working directory
    # In-process (fresh globals, as a script): the frameworks are imported once per test run.
    exec(compile(code, f"docs/integrations/{page}", "exec"), {"__name__": "__main__"})
    out = capsys.readouterr().out
    for expected in EXPECT[page]:
        assert expected in out, (expected, out)


def test_every_page_is_listed_in_the_index() -> None:
    index = (DOCS / "README.md").read_text()
    assert all(f"]({p})" in index for p in PAGES)
