"""Allowed values of a configuration key that the part owning the names registers (:func:`register_choices`).

Kept apart from :mod:`stratamem.config` so that module stays one screenful of
sections; ``stratamem.config.register_choices`` is this function.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

__all__ = ["register_choices", "registered"]

_REGISTERED: dict[tuple[str, str], Callable[[], Iterable[str]]] = {}


def register_choices(section: str, key: str, names: Callable[[], Iterable[str]]) -> None:
    """Make the part that owns a set of names the one source of a key's allowed values.

    ``names`` is read each time a config is validated, so a name its owner
    registers later is accepted too. The context policies register
    ``("ContextConfig", "policy")`` this way (:mod:`stratamem.context.policies`):
    the package is loaded with ``stratamem`` itself, so every config built
    through the package is checked against the policy registry.
    """
    _REGISTERED[(section, key)] = names


def registered(section: str, key: str) -> tuple[str, ...] | None:
    """The names registered for ``section.key`` now, or ``None`` when no part registered any."""
    names = _REGISTERED.get((section, key))
    return tuple(names()) if names is not None else None
