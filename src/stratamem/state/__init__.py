"""Working state and its neighbours: the state document, its prompt projection, instruction files, session logs.

* :mod:`~stratamem.state.working` — :class:`WorkingState`, the per-namespace ``state.json`` (seed 004);
* :mod:`~stratamem.state.prompt` — :func:`project_state`, the state as it goes into a prompt;
* :mod:`~stratamem.state.instructions` — :func:`load_instructions`, ``STRATAMEM.md`` files;
* :mod:`~stratamem.state.sessionlog` — :class:`SessionLogs`, per-session JSON Lines logs.
"""

from __future__ import annotations

from .instructions import INSTRUCTION_FILES, InstructionFile, load_instructions
from .prompt import Omission, StateProjection, project_state
from .sessionlog import SessionLogs, log_line
from .working import SCHEMA_VERSION, TASK_STATUSES, WorkingState, empty_state, validate_state

__all__ = [
    "INSTRUCTION_FILES",
    "SCHEMA_VERSION",
    "TASK_STATUSES",
    "InstructionFile",
    "Omission",
    "SessionLogs",
    "StateProjection",
    "WorkingState",
    "empty_state",
    "load_instructions",
    "log_line",
    "project_state",
    "validate_state",
]
