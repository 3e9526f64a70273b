"""The agent loop: tool-output pruning and history compaction over provider message lists.

Call these from any agent loop, on OpenAI Chat Completions or Anthropic
Messages lists, before each model call:

* :func:`prune_tool_results` (layer 1, no model): trims and clears old tool output in place;
* :class:`Compactor` (layer 2): when the request nears the threshold, replaces old
  turns with a structured checkpoint written by a :class:`~stratamem.llm.ChatModel`,
  stores everything it removes (with a :class:`~stratamem.Memory`), and persists
  the :class:`~stratamem.records.ConversationState`. :meth:`Compactor.prepare_messages` runs both.
"""

from __future__ import annotations

from .compaction import Compactor
from .cut import find_cut_point, history_text, real_user_indices
from .pruning import PruneStats, is_tool_result_message, prune_tool_results
from .results import CompactionResult, PrepareResult

__all__ = [
    "CompactionResult",
    "Compactor",
    "PrepareResult",
    "PruneStats",
    "find_cut_point",
    "history_text",
    "is_tool_result_message",
    "prune_tool_results",
    "real_user_indices",
]
