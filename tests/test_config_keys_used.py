"""Every configuration key is read by some code: a key nothing reads is a promise the library breaks.

The check walks :class:`~stratamem.config.Config` (every dataclass field,
recursively) and looks in the source tree (``src/stratamem``, without
``config.py`` itself, which only declares and validates keys) for a *read* of
each key, using the syntax tree rather than text search:

* a key ``section.name`` is read where an attribute load ``<expr>.name``
  appears in a module that deals with that section: the module loads the
  attribute ``.section`` or names the section's class (``PruningConfig``);
  a top-level key ``name`` is read where ``<expr>.name`` is loaded and
  ``<expr>`` is something called ``config``/``cfg`` (``self.config.tokenizer``);
* a key whose name no other section uses is also read where it is loaded off
  something called ``config``/``cfg`` (``self.config.auto_spill`` in a mixin);
* ``getattr(obj, "name")`` counts as an attribute load of ``name``;
* attribute *stores*, keyword arguments and strings in docstrings never count.

A generic name (``enabled``) may be found in a module that reads it for another
section; the module condition keeps that to modules that handle the section.
"""

from __future__ import annotations

import ast
import dataclasses
from collections.abc import Iterator
from pathlib import Path

from stratamem.config import Config

SRC = Path(__file__).resolve().parents[1] / "src" / "stratamem"

# Keys no code reads on purpose, each with the reason. Keep this empty unless a reason is real.
ALLOWED_UNREAD: dict[str, str] = {}


def _keys(cls: type, prefix: str = "") -> Iterator[tuple[str, type | None]]:
    """``(dotted key, section class or None for top-level keys)`` for every leaf of ``cls``."""
    for f in dataclasses.fields(cls):
        default = f.default_factory() if f.default_factory is not dataclasses.MISSING else f.default
        if dataclasses.is_dataclass(default):
            for key, _ in _keys(type(default), f"{prefix}{f.name}."):
                yield key, type(default)
        else:
            yield f"{prefix}{f.name}", None if not prefix else cls


class _Reads(ast.NodeVisitor):
    """Attribute loads of one module: names loaded, and the ``<config>.<name>`` loads."""

    def __init__(self) -> None:
        self.attrs: set[str] = set()
        self.config_attrs: set[str] = set()
        self.names: set[str] = set()

    def visit_Attribute(self, node: ast.Attribute) -> None:
        if isinstance(node.ctx, ast.Load):
            self.attrs.add(node.attr)
            base = node.value
            base_name = base.attr if isinstance(base, ast.Attribute) else base.id if isinstance(base, ast.Name) else ""
            if base_name in ("config", "cfg", "_config"):
                self.config_attrs.add(node.attr)
        self.generic_visit(node)

    def visit_Name(self, node: ast.Name) -> None:
        self.names.add(node.id)

    def visit_Call(self, node: ast.Call) -> None:
        if (
            isinstance(node.func, ast.Name)
            and node.func.id == "getattr"
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and isinstance(node.args[1].value, str)
        ):
            self.attrs.add(node.args[1].value)
        self.generic_visit(node)


def _modules() -> list[_Reads]:
    out = []
    for path in sorted(SRC.rglob("*.py")):
        if path.name == "config.py" and path.parent == SRC:
            continue
        reads = _Reads()
        reads.visit(ast.parse(path.read_text(encoding="utf-8"), str(path)))
        out.append(reads)
    return out


def unread_keys() -> list[str]:
    """Dotted config keys no module reads."""
    modules = _modules()
    keys = list(_keys(Config))
    owners: dict[str, int] = {}
    for key, _ in keys:
        owners[key.rsplit(".", 1)[-1]] = owners.get(key.rsplit(".", 1)[-1], 0) + 1
    missing = []
    for key, section_cls in keys:
        *path, name = key.split(".")
        if section_cls is None:
            found = any(name in m.config_attrs for m in modules)
        else:
            section = path[-1]
            found = any(
                name in m.attrs
                and (section in m.attrs or section_cls.__name__ in m.names)
                # A name no other section has, loaded off a ``config``/``cfg`` (a mixin's self.config).
                or owners[name] == 1
                and name in m.config_attrs
                for m in modules
            )
        if not found:
            missing.append(key)
    return missing


def test_every_config_key_is_read_somewhere() -> None:
    missing = [k for k in unread_keys() if k not in ALLOWED_UNREAD]
    assert missing == [], f"config keys no code reads (wire them or remove them): {missing}"


def test_the_allow_list_names_only_real_unread_keys() -> None:
    # An entry for a key that is now read (or no longer exists) hides nothing and must go.
    assert set(ALLOWED_UNREAD) <= set(unread_keys())


def test_the_check_finds_a_key_nobody_reads() -> None:
    # The check itself can fail: a module that declares a section but reads one key only.
    reads = _Reads()
    reads.visit(ast.parse("def f(config):\n    cfg = config.context\n    return cfg.policy\n"))
    assert "policy" in reads.attrs and "context" in reads.attrs
    assert "short_buffer_turns" not in reads.attrs
    stored = _Reads()
    stored.visit(ast.parse("x.short_buffer_turns = 3\nf(short_buffer_turns=3)\n"))
    assert "short_buffer_turns" not in stored.attrs
