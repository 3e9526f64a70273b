"""Writing the checkpoint: the model calls, and the messages that carry it into the prompt.

:func:`write_checkpoint` asks the model for the structured checkpoint of the
messages leaving the prompt (an update of the previous one when there is
one), in parts when the transcript exceeds one call's input bound, and caps
the answer at ``checkpoint_max_tokens``. :func:`prefix_messages` is the
synthetic user/assistant pair that replaces them: the checkpoint, or, when
none could be written, a note saying what was left out (with the previous
checkpoint, if any). The prompts and the text work are
:mod:`stratamem.agentloop.checkpoint`; when to call is
:class:`~stratamem.agentloop.Compactor`'s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..config import CompactionConfig, LLMConfig
from ..llm import ChatModel
from ..tokens import Tokenizer, truncate_to_tokens
from .checkpoint import (
    ACK_TEXT,
    CHECKPOINT_HEADER,
    CHECKPOINT_PROMPT,
    OMITTED_HEADER,
    UPDATE_PROMPT,
    files_section,
    serialize_messages,
    split_for_model,
    strip_files_section,
)

__all__ = ["prefix_messages", "write_checkpoint"]


def write_checkpoint(
    model: ChatModel,
    old: Sequence[Mapping[str, Any]],
    previous_summary: str | None,
    *,
    config: CompactionConfig,
    llm: LLMConfig,
    tokenizer: Tokenizer,
) -> tuple[str, int, int, int]:
    """The checkpoint of ``old`` (folded into ``previous_summary``, if any) and what writing it cost.

    Returns:
        ``(checkpoint, calls, input_tokens, output_tokens)``: tokens as the
        provider reported them, else our count.

    Raises:
        Exception: Whatever ``model`` raises (the compactor falls back on any of it).
    """
    transcript = serialize_messages(old, tool_result_chars=config.summary_tool_result_chars)
    previous = strip_files_section(previous_summary) if previous_summary else None
    limit = max(1000, llm.max_input_tokens - config.checkpoint_max_tokens - 1000)
    parts = split_for_model(transcript, limit, tokenizer) or ["(no messages)"]
    calls = n_in = n_out = 0
    for part in parts:
        if previous:
            system = UPDATE_PROMPT
            body = f"## Current checkpoint\n\n{previous}\n\n# New messages\n\n{part}"
        else:
            system, body = CHECKPOINT_PROMPT, f"# Conversation transcript\n\n{part}"
        out = model.complete(system, [{"role": "user", "content": body}], max_tokens=config.checkpoint_max_tokens)
        calls += 1
        n_in += out.input_tokens if out.input_tokens is not None else tokenizer.count(system + body)
        n_out += out.output_tokens if out.output_tokens is not None else tokenizer.count(out.text)
        previous = out.text.strip()
    if tokenizer.count(previous or "") > config.checkpoint_max_tokens:
        # A model may ignore max_tokens; the prompt budget must not depend on it.
        previous = truncate_to_tokens(previous or "", config.checkpoint_max_tokens, tokenizer)
    return previous or "", calls, n_in, n_out


def prefix_messages(
    checkpoint: str | None,
    read: Sequence[str],
    modified: Sequence[str],
    status: str,
    removed: int,
    previous_summary: str | None,
) -> list[dict[str, Any]]:
    """The synthetic user/assistant pair that stands for ``removed`` messages.

    With a ``checkpoint``: the checkpoint and the acknowledgement. Without one
    (``status`` ``truncated`` or ``fallback``): a note saying why the messages
    are not shown, the previous checkpoint if there is one, and the tracked files.
    """
    files = files_section(read, modified)
    if checkpoint is not None:
        return [
            {"role": "user", "content": f"{CHECKPOINT_HEADER}\n\n{checkpoint}"},
            {"role": "assistant", "content": ACK_TEXT},
        ]
    why = (
        "no summarizer is configured"
        if status == "truncated"
        else "the summarizer failed, so no new summary could be written"
    )
    note = (
        f"{OMITTED_HEADER}\n{removed} earlier messages were left out of this prompt because {why}; "
        "they are kept in the conversation's store."
    )
    previous = strip_files_section(previous_summary) if previous_summary else None
    if previous:
        note += f"\n\nThe last summary written before them:\n\n{previous}"
    if files:
        note += f"\n\n{files}"
    return [{"role": "user", "content": note}, {"role": "assistant", "content": ACK_TEXT}]
