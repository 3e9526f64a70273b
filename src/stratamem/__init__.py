"""stratamem: keep an LLM agent's whole history usable inside a fixed token budget.

>>> from stratamem import Memory
>>> mem = Memory(":memory:", namespace="demo")
>>> _ = mem.add([{"role": "user", "content": "Our budget is $50K."},
...              {"role": "assistant", "content": "Noted: $50K."}])
>>> ctx = mem.context("what is the budget?", budget=200)
>>> [m["content"] for m in ctx.messages]
['Our budget is $50K.', 'Noted: $50K.']
>>> ctx.tokens <= 200
True
"""

from __future__ import annotations

import importlib as _importlib
import typing as _typing

from .errors import (
    BackendError,
    BudgetError,
    ConfigError,
    ConflictError,
    DecodeError,
    InvalidTurnError,
    MigrationError,
    ModelError,
    NotFoundError,
    StratamemError,
    ValidationError,
)

if _typing.TYPE_CHECKING:
    from .agentloop.wrap import wrap
    from .aio import AsyncMemory
    from .config import Config
    from .memory import Memory, Status
    from .records import Context, ContextItem, Manifest, Session, StoredTurn, Turn

    __version__: str

# Imported on first use (PEP 562): ``import stratamem`` (and so every ``stratamem`` command) does not
# pay for the memory facade, asyncio, the agent loop and numpy unless it uses them.
_LAZY = {
    "AsyncMemory": ".aio",
    "Config": ".config",
    "Context": ".records",
    "ContextItem": ".records",
    "Manifest": ".records",
    "Memory": ".memory",
    "Session": ".records",
    "Status": ".memory",
    "StoredTurn": ".records",
    "Turn": ".records",
    "wrap": ".agentloop.wrap",
}
# Documented as ``stratamem.X`` (their ``__module__`` says so).
_RENAMED = frozenset(
    {"Config", "Context", "ContextItem", "Manifest", "Memory", "Session", "Status", "StoredTurn", "Turn", "wrap"}
)


def __getattr__(name: str) -> _typing.Any:
    """The public names, imported when first asked for (and ``__version__``, read when first asked for)."""
    if name == "__version__":
        from importlib import metadata

        try:
            value: _typing.Any = metadata.version("stratamem")
        except metadata.PackageNotFoundError:  # running from a source tree that is not installed
            value = "0.0.0+source"
    elif name in _LAZY:
        value = getattr(_importlib.import_module(_LAZY[name], __name__), name)
        if name in _RENAMED:
            value.__module__ = __name__
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY, "__version__"})


__all__ = [
    "AsyncMemory",
    "BackendError",
    "BudgetError",
    "Config",
    "ConfigError",
    "ConflictError",
    "Context",
    "ContextItem",
    "DecodeError",
    "InvalidTurnError",
    "Manifest",
    "Memory",
    "MigrationError",
    "ModelError",
    "NotFoundError",
    "Session",
    "Status",
    "StoredTurn",
    "StratamemError",
    "Turn",
    "ValidationError",
    "wrap",
]
