"""Project instruction files: ``STRATAMEM.md``, the decision records ``docs/adr/*.md``, ``STRATAMEM.local.md``.

Seed 004 keeps project rules in a file versioned with the repository, the
architecture decision records beside it ("``VALARMIND.md`` and ADRs in the repo
are the human and reviewable source") and personal preferences in a git-ignored
local file. All are plain Markdown; this module reads them and counts their
tokens so the context builder can budget for them. It never edits them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import BackendError, DecodeError
from ..tokens import Tokenizer

__all__ = ["ADR_GLOB", "INSTRUCTION_FILES", "InstructionFile", "load_instructions"]

INSTRUCTION_FILES: tuple[tuple[str, Literal["shared", "local"]], ...] = (
    ("STRATAMEM.md", "shared"),
    ("STRATAMEM.local.md", "local"),
)
"""File names and scopes, in prompt order: shared rules first, personal preferences after
(the decision records, :data:`ADR_GLOB`, go between them)."""

ADR_GLOB = "docs/adr/*.md"
"""The project's architecture decision records, read in name order (``0001-…``, ``0002-…``)."""


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """One instruction file as read."""

    path: Path
    """Where it was read from."""
    scope: Literal["shared", "adr", "local"]
    """``shared`` (versioned with the repository), ``adr`` (a decision record, versioned too)
    or ``local`` (personal, git-ignored)."""
    text: str
    """Its content."""
    tokens: int
    """Tokens of :attr:`text`."""


def load_instructions(project_dir: str | os.PathLike[str], tokenizer: Tokenizer) -> tuple[InstructionFile, ...]:
    """Read the instruction files that exist in ``project_dir``: shared, the decision records, local.

    Args:
        project_dir: The project's root directory.
        tokenizer: Counts each file's tokens.

    Returns:
        The files found (absent ones are simply not listed).

    Raises:
        DecodeError: A file is not UTF-8.
        BackendError: A file exists but cannot be read.
    """
    root = Path(project_dir)
    (shared, _), (local, _) = INSTRUCTION_FILES
    order: list[tuple[Path, Literal["shared", "adr", "local"]]] = [(root / shared, "shared")]
    order += [(p, "adr") for p in sorted(root.glob(ADR_GLOB)) if p.is_file()]
    order.append((root / local, "local"))
    found = []
    for path, scope in order:
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise BackendError(f"cannot read {path}: {exc}") from exc
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DecodeError(f"{path} is not UTF-8 (byte {exc.start})") from None
        found.append(InstructionFile(path, scope, text, tokenizer.count(text)))
    return tuple(found)
