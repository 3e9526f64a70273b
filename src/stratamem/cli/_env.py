"""The shells' view of :mod:`stratamem.envvars` (the one parser of the agent-loop variables)."""

from __future__ import annotations

from ..envvars import agentloop_env, apply_agentloop_env

__all__ = ["agentloop_env", "apply_agentloop_env"]
