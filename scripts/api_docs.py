"""Write docs/api.md, the HTTP API reference, from the server's OpenAPI schema.

Usage: ``.venv/bin/python scripts/api_docs.py`` (rewrites docs/api.md) or
``--check`` (exit 1 if docs/api.md is out of date; a test checks the same).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

from stratamem import Memory
from stratamem.web import create_app
from stratamem.web.apiref import to_markdown

OUT = Path(__file__).resolve().parents[1] / "docs" / "api.md"


def schema() -> dict[str, Any]:
    """The OpenAPI schema of a server over an in-memory store."""
    with Memory(":memory:") as mem:
        return create_app(mem).api.openapi()


def render(doc: dict[str, Any]) -> str:
    """The Markdown reference."""
    return to_markdown(doc)


def main() -> int:
    text = render(schema())
    if "--check" in sys.argv:
        if not OUT.exists() or OUT.read_text(encoding="utf-8") != text:
            print(f"{OUT} is out of date: run scripts/api_docs.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text, encoding="utf-8")
    print(f"wrote {OUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
