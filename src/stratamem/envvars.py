"""``STRATAMEM_PRUNING_*`` / ``STRATAMEM_COMPACTION_*``: agent-loop settings from the environment.

The one parser of these variables. The shells apply them to the whole
configuration (:func:`apply_agentloop_env`); the agent loop applies them too
(:func:`section_from_env`, read by :class:`~stratamem.agentloop.Compactor` and
so by ``stratamem.wrap``) to the settings it was not given explicitly: an
agent that sets ``STRATAMEM_COMPACTION_THRESHOLD`` gets the same threshold
through the CLI, the MCP server and a wrapped client. These are the only
variables the library reads. Each names one field of
:class:`~stratamem.config.PruningConfig` or
:class:`~stratamem.config.CompactionConfig` in upper case, e.g.
``STRATAMEM_COMPACTION_THRESHOLD=60000`` or ``STRATAMEM_PRUNING_ENABLED=false``.
Values are parsed by the field's type (``true``/``false``/``1``/``0`` for
flags, ``none`` or empty for an optional number) and then checked like any
configuration; a variable naming no field is an error, not ignored.
"""

from __future__ import annotations

import dataclasses
import os
import types
import typing
from collections.abc import Mapping
from typing import Any

from .config import CompactionConfig, Config, PruningConfig
from .errors import ConfigError

__all__ = ["agentloop_env", "apply_agentloop_env", "section_from_env"]

_SECTIONS = {"pruning": PruningConfig, "compaction": CompactionConfig}
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def _parse(raw: str, hint: Any, name: str) -> Any:
    args = typing.get_args(hint) if typing.get_origin(hint) in (typing.Union, types.UnionType) else ()
    text = raw.strip()
    if args:
        if text.lower() in ("", "none", "null"):
            return None
        hint = next(a for a in args if a is not type(None))
    try:
        if hint is bool:
            if text.lower() in _TRUE:
                return True
            if text.lower() in _FALSE:
                return False
            raise ValueError(text)
        if hint is int:
            return int(text.replace("_", ""))
        if hint is float:
            return float(text)
    except ValueError:
        raise ConfigError(f"{name}={raw!r}: expected {getattr(hint, '__name__', hint)}") from None
    return text


def agentloop_env(environ: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The ``pruning``/``compaction`` changes the variables in ``environ`` ask for.

    Raises:
        ConfigError: A variable names no field, or its value does not parse.
    """
    changes: dict[str, dict[str, Any]] = {}
    for section, cls in _SECTIONS.items():
        prefix = f"STRATAMEM_{section.upper()}_"
        hints = typing.get_type_hints(cls)
        names = {f.name for f in dataclasses.fields(cls)}
        for key in sorted(environ):
            if not key.startswith(prefix):
                continue
            field = key[len(prefix) :].lower()
            if field not in names:
                raise ConfigError(f"{key}: {section} has no setting {field!r} (see docs/configuration.md)")
            changes.setdefault(section, {})[field] = _parse(environ[key], hints[field], key)
    return changes


def apply_agentloop_env(config: Config, environ: Mapping[str, str] | None = None) -> Config:
    """``config`` with the ``STRATAMEM_PRUNING_*``/``STRATAMEM_COMPACTION_*`` overrides applied (validated).

    Raises:
        ConfigError: An unknown variable, or a value that is invalid for its setting.
    """
    changes = agentloop_env(os.environ if environ is None else environ)
    return config.replace(**changes) if changes else config


def section_from_env(section: str, base: Any, environ: Mapping[str, str] | None = None) -> Any:
    """``base`` (a :class:`PruningConfig` or :class:`CompactionConfig`) with the variables of ``section`` applied.

    Args:
        section: ``pruning`` or ``compaction``.
        base: The settings to start from (the memory's, or the defaults).
        environ: Variables to read (default: ``os.environ``).

    Raises:
        ConfigError: An unknown variable of the section, or a value invalid for its setting.
    """
    env = os.environ if environ is None else environ
    prefix = f"STRATAMEM_{section.upper()}_"
    changes = agentloop_env({k: v for k, v in env.items() if k.startswith(prefix)}).get(section)
    if not changes:
        return base
    return getattr(Config().replace(**{section: {**Config.to_dict(base), **changes}}), section)
