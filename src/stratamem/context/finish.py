"""The last assembly step: render the sections and the window, guard the budget, write the manifest.

Sections go into the system text (:func:`~stratamem.context.render.attach_sections`
for the provider formats), the window into the messages. Every cost counted
on the way is an upper bound, so the rendered total is within the budget; the
guard only trims (window turns first, then sections from the last) if a count
was ever low, and the manifest then lists what it removed as near-misses.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ..records import StoredTurn
from ..records.manifests import Context, ContextItem, Manifest, NearMiss
from ..tokens import Tokenizer, count_messages
from .assembly import Assembly
from .history import History
from .render import attach_sections, render, snap_window
from .window import Window

__all__ = ["finish"]


def finish(asm: Assembly, window: Window, history: History, policy: str, notes: Sequence[str]) -> Context:
    """Render, trim to the budget if a count was low, and explain: the finished :class:`Context`.

    ``notes`` are the gatherer's (listed before the steps' own).
    """
    turns = window.turns
    asm.items.extend(
        ContextItem(f"turn:{st.id}", "turn", window.costs[st.id], "recent_window", tier="hot", turn_ids=(st.id,))
        for st in turns
    )
    sections, section_ids = list(asm.sections), list(asm.section_ids)
    ctx = _render(turns, "\n\n".join(sections), asm.fmt, asm.tokenizer)
    # Item costs are upper bounds; this guard only trims if a count was ever low.
    while ctx[3] > asm.budget and (turns or sections):
        if turns:
            turns = snap_window(turns[1:], asm.fmt)
        else:
            sections.pop()
            section_ids.pop()
        ctx = _render(turns, "\n\n".join(sections), asm.fmt, asm.tokenizer)
    # Keep the manifest true to what was rendered: drop items the guard removed.
    shown = set().union(*section_ids) | {f"turn:{st.id}" for st in turns}
    misses = list(asm.misses)
    for gone in [i for i in asm.items if i.id not in shown]:
        misses.append(NearMiss(gone.id, gone.kind, gone.tokens, "over_budget", gone.score))
    items = [i for i in asm.items if i.id in shown]
    misses = _resolve_duplicates(misses, shown)
    step_notes = asm.notes + [note for tid, note in history.excerpt_notes.items() if tid in shown]
    messages, system, text, total = ctx
    manifest = Manifest(
        budget=asm.budget,
        total_tokens=total,
        items=tuple(items),
        near_misses=tuple(misses),
        policy=policy,
        query=asm.query,
        tokenizer=asm.tokenizer.name,
        notes=tuple(notes) + tuple(step_notes),
    )
    return Context(format=asm.fmt, messages=messages, system=system, text=text, manifest=manifest)


def _resolve_duplicates(misses: list[NearMiss], shown: set[str]) -> list[NearMiss]:
    """Point every ``duplicate_of`` at a copy that is shown.

    A unit can lose to one that later loses in turn (an item to an earlier
    item that a recalled turn then restates): follow the chain to the kept copy.
    """
    link = {m.id: m.duplicate_of for m in misses if m.duplicate_of is not None}
    out = []
    for m in misses:
        target, steps = m.duplicate_of, 0
        while target is not None and target not in shown and target in link and steps < len(link):
            target, steps = link[target], steps + 1
        out.append(m if target == m.duplicate_of else dataclasses.replace(m, duplicate_of=target))
    return out


def _render(
    window: list[StoredTurn], system_text: str, fmt: str, tokenizer: Tokenizer
) -> tuple[tuple[dict, ...], str | None, str, int]:
    """``(messages, system, text, tokens)`` of the window with the sections as system text."""
    messages, system, text = render([st.turn for st in window], fmt)
    if fmt == "text":
        full = "\n\n".join(p for p in (system_text, text) if p)
        return (), None, full, tokenizer.count(full)
    messages, system = attach_sections(messages, system, system_text, fmt)
    full = "\n\n".join(p for p in (system_text, text) if p)
    return messages, system, full, count_messages(messages, tokenizer, system=system)
