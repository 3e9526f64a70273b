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

from importlib import metadata as _metadata

from .agentloop.wrap import wrap
from .aio import AsyncMemory
from .config import Config
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
from .memory import Memory, Status
from .records import Context, ContextItem, Manifest, Session, StoredTurn, Turn

try:
    __version__ = _metadata.version("stratamem")
except _metadata.PackageNotFoundError:  # running from a source tree that is not installed
    __version__ = "0.0.0+source"

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

for _name in (
    "Config",
    "Context",
    "ContextItem",
    "Manifest",
    "Memory",
    "Session",
    "Status",
    "StoredTurn",
    "Turn",
    "wrap",
):
    globals()[_name].__module__ = __name__
del _name
