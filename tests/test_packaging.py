"""The project's packaging and layout promises: the extras, the pinned tools, the module sizes.

``pip install 'stratamem[all]'`` must give every user-facing part (``stratamem serve``
included); the checks ``.ci/run`` makes (ruff, mypy) are pinned in the ``dev`` extra
and locked in constraints.txt at the same versions; no module under ``src/`` grows
past 600 lines (one concept per module).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
EXTRAS: dict[str, list[str]] = PYPROJECT["project"]["optional-dependencies"]

# The extras a user installs for a part of the library (framework adapters and the
# developer extras are separate on purpose: each pulls a whole framework or toolchain).
USER_PARTS = ("embed", "llm", "mcp", "postgres", "lexical", "web")
MAX_MODULE_LINES = 600


def _self_extras(requirements: list[str]) -> set[str]:
    """The extras of ``stratamem`` itself that a list of requirements names (``stratamem[a,b]``)."""
    named: set[str] = set()
    for req in requirements:
        m = re.fullmatch(r"stratamem\[([a-z0-9_,-]+)\]", req.replace(" ", ""))
        if m:
            named.update(m.group(1).split(","))
    return named


def _expanded(extra: str) -> set[str]:
    """``extra`` and every stratamem extra it pulls in, transitively."""
    seen: set[str] = set()
    todo = [extra]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(_self_extras(EXTRAS[name]))
    return seen


def test_all_includes_web_so_all_gives_stratamem_serve() -> None:
    assert "web" in _expanded("all")


@pytest.mark.parametrize("part", USER_PARTS)
def test_all_includes_every_user_facing_part(part: str) -> None:
    assert part in _expanded("all")


def test_every_extra_named_inside_an_extra_exists() -> None:
    for name, requirements in EXTRAS.items():
        assert _self_extras(requirements) <= set(EXTRAS), name


def test_the_test_extra_installs_the_checks_ci_runs() -> None:
    assert {"all", "dev"} <= _expanded("test")


def _pins(requirements: list[str]) -> dict[str, str]:
    out = {}
    for req in requirements:
        m = re.fullmatch(r"([A-Za-z0-9_.-]+)==([^;\s]+)", req.strip())
        if m:
            out[m.group(1).lower().replace("_", "-")] = m.group(2)
    return out


def test_dev_tools_are_pinned_exactly_and_locked_at_the_same_versions() -> None:
    dev = _pins(EXTRAS["dev"])
    assert {"ruff", "mypy"} <= set(dev)
    assert len(dev) == len(EXTRAS["dev"]), "every dev tool is pinned with =="
    lock = _pins([ln for ln in (ROOT / "constraints.txt").read_text().splitlines() if not ln.startswith("#")])
    assert {name: lock.get(name) for name in dev} == dev


def test_ci_runs_ruff_and_mypy_before_the_tests() -> None:
    steps = [ln.strip() for ln in (ROOT / ".ci" / "run").read_text().splitlines() if ln.strip().startswith(".venv/")]
    assert steps == [
        ".venv/bin/ruff check .",
        ".venv/bin/ruff format --check .",
        ".venv/bin/mypy",
        ".venv/bin/python -m pytest -q",
    ]


def test_no_module_under_src_is_over_600_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in (ROOT / "src").rglob("*.py")
    }
    assert sizes, "no modules found"
    assert {p: n for p, n in sizes.items() if n > MAX_MODULE_LINES} == {}
