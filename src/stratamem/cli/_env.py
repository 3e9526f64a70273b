"""``STRATAMEM_PRUNING_*`` / ``STRATAMEM_COMPACTION_*``: agent-loop settings from the environment.

For the shells only (the library never reads the environment). Each variable
names one field of :class:`~stratamem.config.PruningConfig` or
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

from ..config import CompactionConfig, Config, PruningConfig
from ..errors import ConfigError

__all__ = ["agentloop_env", "apply_agentloop_env"]

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
