"""Project instruction files: the shared ``STRATAMEM.md`` and the personal ``STRATAMEM.local.md``.

Seed 004 keeps project rules in a file versioned with the repository and
personal preferences in a git-ignored local file. Both are plain Markdown in
the project's root; this module reads them and counts their tokens so the
context builder can budget for them. It never edits them.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from ..errors import BackendError, DecodeError
from ..tokens import Tokenizer

__all__ = ["INSTRUCTION_FILES", "InstructionFile", "load_instructions"]

INSTRUCTION_FILES: tuple[tuple[str, Literal["shared", "local"]], ...] = (
    ("STRATAMEM.md", "shared"),
    ("STRATAMEM.local.md", "local"),
)
"""File names and scopes, in prompt order: shared rules first, personal preferences after."""


@dataclass(frozen=True, slots=True)
class InstructionFile:
    """One instruction file as read."""

    path: Path
    """Where it was read from."""
    scope: Literal["shared", "local"]
    """``shared`` (versioned with the repository) or ``local`` (personal, git-ignored)."""
    text: str
    """Its content."""
    tokens: int
    """Tokens of :attr:`text`."""


def load_instructions(project_dir: str | os.PathLike[str], tokenizer: Tokenizer) -> tuple[InstructionFile, ...]:
    """Read the instruction files that exist in ``project_dir``, shared first.

    Args:
        project_dir: The project's root directory.
        tokenizer: Counts each file's tokens.

    Returns:
        The files found (absent ones are simply not listed).

    Raises:
        DecodeError: A file is not UTF-8.
        BackendError: A file exists but cannot be read.
    """
    found = []
    for name, scope in INSTRUCTION_FILES:
        path = Path(project_dir) / name
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
