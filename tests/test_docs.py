"""The docs and the code stay in step: the CLI, the Python examples, the import paths, the links.

In the spirit of sqlite-utils' ``test_docs.py``:

* ``docs/cli.md`` is generated from the click command tree (``scripts/cli_docs.py``)
  and must be current, so every command and option is documented; every command
  is also named on a hand-written page (or the README);
* every ``stratamem …`` command line in the docs' code names a command that exists,
  and the options written after it are options of that command;
* every Python example compiles, and the self-contained ones (no name used that the
  example does not define) run, offline, in a scratch directory, unless the page marks
  one ``<!-- not run: why -->`` (it needs a server or a file of yours);
* every ``from stratamem… import X`` / ``import stratamem…`` in an example resolves
  without a deprecation warning, and every ``stratamem.x.y`` path written in code
  spans names a module or an attribute that exists;
* every relative link between the pages (and to files of the repository) resolves,
  ``#anchors`` included.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import click
import pytest

from stratamem.cli import main as cli

ROOT = Path(__file__).resolve().parent.parent
PAGES = sorted([ROOT / "README.md", ROOT / "CONTRIBUTING.md", ROOT / "CHANGELOG.md", *(ROOT / "docs").rglob("*.md")])
GENERATED = {ROOT / "docs" / "cli.md", ROOT / "docs" / "api.md"}
FENCE = re.compile(r"^```([\w-]*)\n(.*?)^```", re.S | re.M)


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


def _load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _commands(group: click.Group, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], click.Command]]:
    for name in sorted(group.commands):
        command = group.commands[name]
        yield (*path, name), command
        if isinstance(command, click.Group):
            yield from _commands(command, (*path, name))


def _long_options(command: click.Command) -> set[str]:
    return {o for p in command.params if isinstance(p, click.Option) for o in [*p.opts, *p.secondary_opts]}


def _text_without_code(text: str) -> str:
    return FENCE.sub("", text)


# --- the command line ---------------------------------------------------------------------


def test_the_cli_reference_is_current() -> None:
    mod = _load_script("cli_docs")
    assert mod.render() == mod.OUT.read_text(encoding="utf-8"), "run scripts/cli_docs.py"


@pytest.mark.parametrize(
    ("path", "command"), list(_commands(cli)), ids=lambda v: " ".join(v) if isinstance(v, tuple) else ""
)
def test_every_command_and_its_options_are_documented(path: tuple[str, ...], command: click.Command) -> None:
    name = "stratamem " + " ".join(path)
    reference = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
    heading = re.search(rf"^#+ `{re.escape(name)}`\n(.*?)(?=^#+ `stratamem|\Z)", reference, re.S | re.M)
    assert heading, f"{name} has no section in docs/cli.md"
    for option in sorted(_long_options(command)):
        assert f"`{option}`" in heading.group(1), f"{name} {option} missing from docs/cli.md"
    hand_written = "\n".join(p.read_text(encoding="utf-8") for p in PAGES if p not in GENERATED)
    assert re.search(re.escape(name) + r"(?![\w-])", hand_written), f"{name} is named on no hand-written page"


def _command_lines() -> Iterator[tuple[str, str]]:
    """``(page, line)`` for every ``stratamem …`` command written in a code block or code span."""
    prompt = re.compile(r"^\s*(?:\$\s+)?(?:\S*/)?stratamem\s+(.*)$")
    for page in PAGES:
        if page in GENERATED:
            continue
        text = page.read_text(encoding="utf-8")
        for lang, body in FENCE.findall(text):
            if lang in ("python", "json", "yaml", "toml", "jsonc"):
                continue
            for line in body.splitlines():
                m = prompt.match(line)
                if m and not line.lstrip().startswith("#") and not m.group(1).split(" ")[0].endswith(":"):
                    yield _rel(page), "stratamem " + m.group(1)
        for span in re.findall(r"`([^`\n]+)`", _text_without_code(text)):
            m = prompt.match(span)
            if m and not m.group(1).split(" ")[0].endswith(":"):  # (a log line, not a command)
                yield _rel(page), "stratamem " + m.group(1)


def _check_command_line(line: str) -> str | None:
    """What is wrong with ``line`` as a ``stratamem`` command (``None``: nothing).

    ``a | b | c`` lists alternatives: a ``b`` that names a command is a command beside
    ``a``; anything else (``--all``, ``KEY --unset``) is another way to call ``a``.
    """
    first, *others = line.split("#")[0].split(" | ")
    why, path = _check_one(first)
    parent: click.Command = cli
    for name in path[:-1]:
        parent = parent.commands[name]  # type: ignore[attr-defined]
    for other in others:
        sibling = isinstance(parent, click.Group) and other.split()[0] in parent.commands
        why = why or _check_one(" ".join(["stratamem", *(path[:-1] if sibling else path), other]))[0]
    return why


def _check_one(line: str) -> tuple[str | None, list[str]]:
    """What is wrong with one command (``None``: nothing) and the command path it names."""
    words = [w for w in re.split(r"\s+", line.strip()) if w][1:]
    path: list[str] = []
    group: click.Group = cli
    command: click.Command = cli
    known = _long_options(cli)
    i = 0
    while i < len(words):  # top-level options, then the command path
        word = words[i].strip("[]()")
        if word.startswith("-"):
            option = next((p for p in cli.params if isinstance(p, click.Option) and word.split("=")[0] in p.opts), None)
            i += 1 if option is None or option.is_flag or "=" in word else 2
            continue
        if word in group.commands:
            command = group.commands[word]
            path.append(word)
            i += 1
            if isinstance(command, click.Group):
                group = command
                continue
        elif command is cli or (isinstance(command, click.Group) and re.fullmatch(r"[a-z][a-z-]*", word)):
            if command is cli or word not in ("…", "..."):
                return f"no command {word!r} under {'stratamem ' + ' '.join(path)!r}", path
        break
    known |= _long_options(command) | {"--help"}
    for word in words[i:]:
        for option in re.findall(r"(?<![\w-])(--[a-z][a-z0-9-]*)", word):
            if option not in known:
                return f"{option} is not an option of {command.name!r}", path
    return None, path


def test_every_command_line_in_the_docs_names_a_real_command_and_options() -> None:
    lines = list(_command_lines())
    assert len(lines) > 50, "the scan found too few command lines"
    problems = [(page, line, why) for page, line in lines if (why := _check_command_line(line))]
    assert problems == []


def test_the_command_line_check_refuses_what_does_not_exist() -> None:
    assert _check_command_line("stratamem items recall 'budget' --no-promote") is None
    assert _check_command_line("stratamem --db x.db -n alice context 'q' --budget 500") is None
    assert _check_command_line("stratamem item list") is not None
    assert _check_command_line("stratamem items frobnicate") is not None
    assert _check_command_line("stratamem context 'q' --budgett 5") is not None


# --- Python examples --------------------------------------------------------------------------


NOT_RUN = re.compile(r"<!-- not run: [^>]+ -->\n$")
"""The marker before an example that needs what a test cannot give (a server, a file of yours)."""


def _python_blocks() -> list[tuple[str, int, str, bool]]:
    """``(page, line, code, marked not run)`` of every Python example."""
    blocks = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m.group(1) == "python":
                marked = bool(NOT_RUN.search(text[: m.start()]))
                blocks.append((_rel(page), text[: m.start()].count("\n") + 1, m.group(2), marked))
    return blocks


BLOCKS = _python_blocks()


def _free_names(tree: ast.Module) -> set[str]:
    """Names an example reads but neither defines nor imports (nor are builtins)."""
    bound: set[str] = set(dir(builtins))
    loaded: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            (loaded if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.alias):
            bound.add((node.asname or node.name).split(".")[0])
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            bound.add(node.name)
    return loaded - bound


def _self_contained(code: str) -> bool:
    return not _free_names(ast.parse(code))


@pytest.mark.parametrize(("page", "line", "code"), [b[:3] for b in BLOCKS], ids=[f"{b[0]}:{b[1]}" for b in BLOCKS])
def test_python_example_compiles(page: str, line: int, code: str) -> None:
    compile(code, f"{page}:{line}", "exec")


# docs/integrations/ examples run in tests/test_integration_docs.py, with their expected output.
RUNNABLE = [b[:3] for b in BLOCKS if _self_contained(b[2]) and not b[3] and not b[0].startswith("docs/integrations/")]


def test_some_examples_are_self_contained() -> None:
    assert len(RUNNABLE) >= 3, [f"{p}:{n}" for p, n, _ in RUNNABLE]


def test_every_example_marked_not_run_is_self_contained_otherwise() -> None:
    # The marker is for examples that would run but need an outside resource, not a way to skip a broken one.
    marked = [f"{b[0]}:{b[1]}" for b in BLOCKS if b[3] and not _self_contained(b[2])]
    assert marked == []


@pytest.mark.parametrize(("page", "line", "code"), RUNNABLE, ids=[f"{p}:{n}" for p, n, _ in RUNNABLE])
def test_self_contained_python_example_runs(
    page: str, line: int, code: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    exec(compile(code, f"{page}:{line}", "exec"), {"__name__": "__main__"})


# --- import paths -----------------------------------------------------------------------------


def _imports() -> list[str]:
    """Every ``import stratamem…`` / ``from stratamem… import …`` statement of the examples."""
    found = set()
    for _, _, code, _ in BLOCKS:
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "stratamem":
                names = ", ".join(a.name for a in node.names)
                found.add(f"from {node.module} import {names}")
            elif isinstance(node, ast.Import):
                found.update(f"import {a.name}" for a in node.names if a.name.split(".")[0] == "stratamem")
    return sorted(found)


def test_every_import_in_the_examples_resolves_without_a_warning() -> None:
    statements = _imports()
    assert len(statements) >= 10
    # A fresh interpreter: a module imported earlier in this process would not warn again.
    probe = (
        "import sys, warnings\n"
        "warnings.simplefilter('always')\n"
        "bad = []\n"
        f"for s in {statements!r}:\n"
        "    with warnings.catch_warnings(record=True) as caught:\n"
        "        try:\n"
        "            exec(s, {})\n"
        "        except Exception as exc:\n"
        "            bad.append(f'{s}: {type(exc).__name__}: {exc}')\n"
        "    bad += [f'{s}: warns {w.message}' for w in caught if 'stratamem' in f'{w.filename} {w.message}']\n"
        "print('\\n'.join(bad))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300, check=True)
    assert out.stdout.strip() == ""


def _dotted_paths() -> Iterator[tuple[str, str]]:
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for span in re.findall(r"`([^`\n]+)`", _text_without_code(text)):
            # (a file name such as ``stratamem.db`` is not a path into the package)
            for path in re.findall(r"(?<![\w.])(stratamem(?:\.[A-Za-z_]\w*)+)(?![\w.])", span):
                if re.search(r"\.(db|md|yaml|yml|json|jsonl|toml|log)$", path):
                    continue
                yield _rel(page), path


def _resolves(path: str) -> bool:
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj: object = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        for attr in parts[cut:]:
            if not hasattr(obj, attr):
                return False
            obj = getattr(obj, attr)
        return True
    return False


def test_every_stratamem_path_in_code_spans_exists() -> None:
    paths = sorted(set(_dotted_paths()))
    assert len(paths) > 30
    assert [(page, path) for page, path in paths if not _resolves(path)] == []


# --- links ------------------------------------------------------------------------------------


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[`*_]|\[([^\]]*)\]\([^)]*\)", lambda m: m.group(1) or "", heading.strip().lower())
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    out = set()
    for heading in re.findall(r"^#{1,6} (.+)$", _text_without_code(page.read_text(encoding="utf-8")), re.M):
        slug = _slug(heading)
        n = seen.get(slug, 0)
        seen[slug] = n + 1
        out.add(slug if n == 0 else f"{slug}-{n}")
    return out


def _links() -> Iterator[tuple[Path, str]]:
    for page in PAGES:
        text = _text_without_code(page.read_text(encoding="utf-8"))
        text = re.sub(r"`[^`\n]*`", "", text)
        for target in re.findall(r"\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)", text):
            if not re.match(r"[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto: are not checked
                yield page, target


def test_every_relative_link_resolves() -> None:
    links = list(_links())
    assert len(links) > 40
    broken = []
    for page, target in links:
        file_part, _, anchor = target.partition("#")
        dest = (page.parent / file_part).resolve() if file_part else page
        if not dest.exists():
            broken.append((_rel(page), target, "no such file"))
        elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
            broken.append((_rel(page), target, "no such heading"))
    assert broken == []


def test_the_anchor_rule_matches_github() -> None:
    assert _slug("`Memory.context` latency: the first measurements") == "memorycontext-latency-the-first-measurements"
    assert _slug("Stored vectors: int8 with a scale") == "stored-vectors-int8-with-a-scale"
    assert _slug("The onnxruntime engine") == "the-onnxruntime-engine"
