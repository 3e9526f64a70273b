"""Context assembly: what goes into a prompt within a token budget, rendered and explained.

* :mod:`~stratamem.context.policies` — the registry of context policies
  (:data:`POLICIES`, :func:`policy_names`), the one source of policy names;
  :mod:`~stratamem.context.policy` — what a :class:`Policy` is (its sources,
  its allocation, its special rules);
* :mod:`~stratamem.context.gather` — the reads a policy's sources make from a
  memory's :class:`Parts`; :mod:`~stratamem.context.sources` — instruction
  files, working state, the checkpoint, ranked summaries (:class:`SummaryIndex`);
* :mod:`~stratamem.context.assemble` — :func:`build_context` (the facade's entry
  point) and the pure :func:`assemble`, which runs the steps in order over one
  :class:`~stratamem.context.assembly.Assembly`: fixed blocks, the recent window
  (:mod:`~stratamem.context.window`), recalled history (:mod:`~stratamem.context.history`),
  summaries (:mod:`~stratamem.context.summaries`), render and manifest
  (:mod:`~stratamem.context.finish`);
* :mod:`~stratamem.context.units` — the candidates (:class:`Candidates`, :class:`FixedBlock`,
  :class:`Recalled`, :class:`SummaryUnit`, :class:`ItemUnit`);
* :mod:`~stratamem.context.dedup` — one copy of each fact (:class:`Shown`);
* :mod:`~stratamem.context.render` — rendering for a provider, the recent window
  snapped to a valid request (:func:`recent_window`), section placement.

What an assembled context holds is a record (:class:`~stratamem.records.Context`
with its :class:`~stratamem.records.Manifest`); the budget and format checks are
:mod:`stratamem.text`'s.
"""

from __future__ import annotations

from .assemble import assemble, build_context
from .dedup import Shown
from .gather import Parts, Request
from .policies import POLICIES, get_policy, policy_names, register
from .policy import Policy
from .render import recent_window
from .sources import SummaryIndex
from .units import Candidates, FixedBlock, ItemUnit, Recalled, SummaryUnit

__all__ = [
    "POLICIES",
    "Candidates",
    "FixedBlock",
    "ItemUnit",
    "Parts",
    "Policy",
    "Recalled",
    "Request",
    "Shown",
    "SummaryIndex",
    "SummaryUnit",
    "assemble",
    "build_context",
    "get_policy",
    "policy_names",
    "recent_window",
    "register",
]
