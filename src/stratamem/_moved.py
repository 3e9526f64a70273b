"""Old import paths of moved modules: they keep working for one release, with a DeprecationWarning.

The package was regrouped by concept (``pyramid/``, ``items/``, ``context/``,
``state/``, ``store/sqlite/``, ``store/postgres/``). Code written against the
flat layout (``import stratamem.segment``, ``from stratamem.store.sqlite_nodes
import ...``) still runs: :class:`MovedFinder` sits on :data:`sys.meta_path`
and answers an old dotted name with the module at its new place — the same
module object, so ``isinstance`` checks and monkeypatching see one module —
after a :class:`DeprecationWarning` naming the new path. Old names that became
packages (``stratamem.pyramid`` was a module, now a package) forward their
former attributes through :func:`package_getattr`, with the same warning.

A finder, not stub files at the old paths: stub files would make git see a
deleted-and-recreated file instead of a rename, and edits made elsewhere to the
old path would not follow the file to its new place at merge.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import sys
import warnings
from collections.abc import Callable
from types import ModuleType
from typing import Any

__all__ = ["MOVED", "FORMER_MODULES", "MovedFinder", "install", "package_getattr"]

#: Old module name -> its new name, for modules whose old name no longer exists.
MOVED: dict[str, str] = {
    "stratamem.archive": "stratamem.pyramid.archive",
    "stratamem.assemble": "stratamem.context.assemble",
    "stratamem.escalation": "stratamem.pyramid.escalation",
    "stratamem.instructions": "stratamem.state.instructions",
    "stratamem.item_core": "stratamem.items.core",
    "stratamem.item_recall": "stratamem.items.recall",
    "stratamem.item_records": "stratamem.items.records",
    "stratamem.item_review": "stratamem.items.review",
    "stratamem.item_search": "stratamem.items.search",
    "stratamem.item_status": "stratamem.items.status",
    "stratamem.item_tiers": "stratamem.items.tiers",
    "stratamem.manifest": "stratamem.context.manifest",
    "stratamem.metrics": "stratamem.items.metrics",
    "stratamem.nodes": "stratamem.pyramid.nodes",
    "stratamem.retention": "stratamem.pyramid.retention",
    "stratamem.segment": "stratamem.pyramid.segment",
    "stratamem.sessionlog": "stratamem.state.sessionlog",
    "stratamem.sources": "stratamem.context.sources",
    "stratamem.stateprompt": "stratamem.state.prompt",
    # Per-backend DDL modules folded into the shared feature stores (issue 16).
    "stratamem.store.postgres.embeddings": "stratamem.store.embedding_cache",
    "stratamem.store.postgres.passages": "stratamem.store.passage_store",
    "stratamem.store.postgres.turn_embeddings": "stratamem.store.turn_index",
    "stratamem.store.sqlite.embeddings": "stratamem.store.embedding_cache",
    "stratamem.store.sqlite.passages": "stratamem.store.passage_store",
    "stratamem.store.sqlite.turn_embeddings": "stratamem.store.turn_index",
    "stratamem.store.postgres_conversations": "stratamem.store.conversations",
    "stratamem.store.postgres_embeddings": "stratamem.store.embedding_cache",
    "stratamem.store.postgres_forget": "stratamem.store.postgres.forget",
    "stratamem.store.postgres_ingest_keys": "stratamem.store.ingest_keys",
    "stratamem.store.postgres_items": "stratamem.store.postgres.items",
    "stratamem.store.postgres_manifests": "stratamem.store.manifests",
    "stratamem.store.postgres_migrate": "stratamem.store.postgres.migrate",
    "stratamem.store.postgres_nodes": "stratamem.store.postgres.nodes",
    "stratamem.store.postgres_schema": "stratamem.store.postgres.schema",
    "stratamem.store.postgres_search": "stratamem.store.postgres.search",
    "stratamem.store.postgres_turn_embeddings": "stratamem.store.turn_index",
    "stratamem.store.sqlite_conversations": "stratamem.store.conversations",
    "stratamem.store.sqlite_embeddings": "stratamem.store.embedding_cache",
    "stratamem.store.sqlite_forget": "stratamem.store.sqlite.forget",
    "stratamem.store.sqlite_ingest_keys": "stratamem.store.ingest_keys",
    "stratamem.store.sqlite_items": "stratamem.store.sqlite.items",
    "stratamem.store.sqlite_manifests": "stratamem.store.manifests",
    "stratamem.store.sqlite_nodes": "stratamem.store.sqlite.nodes",
    "stratamem.store.sqlite_schema": "stratamem.store.sqlite.schema",
    "stratamem.store.sqlite_turn_embeddings": "stratamem.store.turn_index",
    "stratamem.tiers": "stratamem.pyramid.tiers",
}

#: Old module names that are packages now -> the module that holds the old module's contents.
FORMER_MODULES: dict[str, str] = {
    "stratamem.context": "stratamem.context.render",
    "stratamem.items": "stratamem.items.api",
    "stratamem.pyramid": "stratamem.pyramid.consolidate",
    "stratamem.state": "stratamem.state.working",
    "stratamem.store.postgres": "stratamem.store.postgres.store",
    "stratamem.store.sqlite": "stratamem.store.sqlite.store",
}


def _warn(old: str, new: str) -> None:
    # stacklevel 3 would still point into importlib; the message carries the fix instead.
    warnings.warn(f"{old} moved to {new}; the old path works for one release", DeprecationWarning, stacklevel=3)


class _AliasLoader(importlib.abc.Loader):
    """Loads an old name as the already-imported module at its new name."""

    def __init__(self, old: str, new: str) -> None:
        self.old, self.new = old, new
        self._spec: importlib.machinery.ModuleSpec | None = None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        _warn(self.old, self.new)
        module = importlib.import_module(self.new)
        self._spec = module.__spec__
        return module

    def exec_module(self, module: ModuleType) -> None:
        # The import system set the alias spec on the real module; its own spec goes back
        # so reloads and pickling keep using the new name.
        if self._spec is not None:
            module.__spec__ = self._spec


class MovedFinder(importlib.abc.MetaPathFinder):
    """Finds the old dotted names listed in :data:`MOVED`."""

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        """A spec loading ``fullname``'s new module when ``fullname`` is an old name, else ``None``."""
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.machinery.ModuleSpec(fullname, _AliasLoader(fullname, new))


def install() -> None:
    """Put one :class:`MovedFinder` on :data:`sys.meta_path` (idempotent)."""
    if not any(isinstance(finder, MovedFinder) for finder in sys.meta_path):
        sys.meta_path.append(MovedFinder())


def package_getattr(package: str, keep: tuple[str, ...] = ()) -> Callable[[str], Any]:
    """A module ``__getattr__`` for ``package`` forwarding its former module's names.

    ``keep`` are names the package exports for good (no warning); any other name
    the former module defined is returned with a :class:`DeprecationWarning`.
    """
    former = FORMER_MODULES[package]

    def __getattr__(name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        module = importlib.import_module(former)
        try:
            value = getattr(module, name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        if name not in keep:
            _warn(f"{package}.{name}", f"{former}.{name}")
        # Kept on the package, so the warning comes once and later lookups cost nothing.
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
