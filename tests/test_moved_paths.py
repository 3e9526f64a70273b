"""Old flat-layout import paths: they import, warn with the new path, and give the very same module object."""

from __future__ import annotations

import importlib
import importlib.util
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

import stratamem
from stratamem import _moved

SRC = Path(stratamem.__file__).parent


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_old_module_path_warns_and_is_the_new_module(old: str, monkeypatch: pytest.MonkeyPatch) -> None:
    new = _moved.MOVED[old]
    real = importlib.import_module(new)
    monkeypatch.delitem(sys.modules, old, raising=False)
    with pytest.warns(DeprecationWarning, match=f"^{old} moved to {new};"):
        alias = importlib.import_module(old)
    assert alias is real
    assert real.__name__ == new
    assert real.__spec__ is not None and real.__spec__.name == new  # the alias did not take over its spec
    assert sys.modules[old] is real


@pytest.mark.parametrize("old", sorted(_moved.MOVED))
def test_no_stub_file_at_an_old_path(old: str) -> None:
    relative = old.split(".", 1)[1].replace(".", "/")
    assert not (SRC / f"{relative}.py").exists()
    assert not (SRC / relative).is_dir()


@pytest.mark.parametrize(("package", "name"), [
    ("stratamem.pyramid", "Pyramid"),
    ("stratamem.items", "Items"),
    ("stratamem.context", "recent_window"),
    ("stratamem.state", "WorkingState"),
    ("stratamem.store.sqlite", "turn_columns"),
    ("stratamem.store.postgres", "redact_dsn"),
])
def test_former_module_names_reachable_on_the_package_with_a_warning(package: str, name: str,
                                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = importlib.import_module(package)
    former = importlib.import_module(_moved.FORMER_MODULES[package])
    monkeypatch.delitem(pkg.__dict__, name, raising=False)
    with pytest.warns(DeprecationWarning, match=f"^{package}.{name} moved to {former.__name__}.{name};"):
        value = getattr(pkg, name)
    assert value is getattr(former, name)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert getattr(pkg, name) is value  # kept: the second lookup does not warn again


@pytest.mark.parametrize(("package", "name"), [("stratamem.store.sqlite", "SQLiteStore"),
                                               ("stratamem.store.postgres", "PostgresStore")])
def test_backend_class_stays_on_its_package_without_a_warning(package: str, name: str,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    pkg = importlib.import_module(package)
    monkeypatch.delitem(pkg.__dict__, name, raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        value = getattr(pkg, name)
    assert value is getattr(importlib.import_module(_moved.FORMER_MODULES[package]), name)


def test_unknown_name_on_a_package_is_an_attribute_error() -> None:
    import stratamem.pyramid

    with pytest.raises(AttributeError, match="has no attribute 'no_such_name'"):
        stratamem.pyramid.no_such_name  # noqa: B018 - the lookup is the test


def test_finder_ignores_names_it_does_not_know() -> None:
    assert _moved.MovedFinder().find_spec("stratamem.no_such_module") is None
    assert importlib.util.find_spec("stratamem.pyramid.segment") is not None


def test_finder_installed_once() -> None:
    _moved.install()
    _moved.install()
    assert sum(isinstance(f, _moved.MovedFinder) for f in sys.meta_path) == 1


def test_old_path_in_a_fresh_interpreter() -> None:
    # A user's script importing the old path first, before anything else of stratamem.
    code = ("import warnings; warnings.simplefilter('error', DeprecationWarning)\n"
            "try:\n    import stratamem.store.sqlite_nodes\nexcept DeprecationWarning as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ("stratamem.store.sqlite_nodes moved to stratamem.store.sqlite.nodes; "
                                  "the old path works for one release")


@pytest.mark.parametrize(("old", "name", "new"), [
    ("stratamem.store.sqlite.nodes", "NewNode", "stratamem.store.new_rows"),
    ("stratamem.store.postgres.nodes", "NewNode", "stratamem.store.new_rows"),
    ("stratamem.store.sqlite.items", "NewItem", "stratamem.store.new_rows"),
    ("stratamem.store.postgres.items", "NewItem", "stratamem.store.new_rows"),
    ("stratamem.store.sqlite.items", "view_clause", "stratamem.store.item_view"),
])
def test_moved_store_records_stay_importable_from_the_backend_modules(old: str, name: str, new: str) -> None:
    # Moved names, not modules: the backend module re-exports the very same object.
    assert getattr(importlib.import_module(old), name) is getattr(importlib.import_module(new), name)
    assert name in importlib.import_module(old).__all__
