"""The public API stays small, sorted, documented and complete."""

from __future__ import annotations

import inspect

import stratamem


def test_all_is_sorted_and_complete() -> None:
    assert stratamem.__all__ == sorted(stratamem.__all__)
    public = {
        n
        for n in dir(stratamem)
        if not n.startswith("_") and n != "annotations" and not inspect.ismodule(getattr(stratamem, n))
    }
    assert public == set(stratamem.__all__)
    assert len(stratamem.__all__) <= 25


def test_exported_names_show_the_public_module() -> None:
    for name in stratamem.__all__:
        assert getattr(stratamem, name).__module__ == "stratamem", name


def test_every_public_name_has_a_docstring() -> None:
    for name in stratamem.__all__:
        obj = getattr(stratamem, name)
        assert inspect.getdoc(obj), name
        for attr, member in vars(obj).items() if inspect.isclass(obj) else ():
            if not attr.startswith("_") and callable(member):
                assert inspect.getdoc(member), f"{name}.{attr}"


def test_the_readme_quick_example_runs() -> None:
    import doctest

    assert doctest.testmod(stratamem).failed == 0
