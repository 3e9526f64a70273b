"""A fixed block (instructions, working state, checkpoint) placed in an assembly, shrunk to fit when it can."""

from __future__ import annotations

from ..errors import StratamemError
from ..records.manifests import ContextItem, NearMiss
from .assembly import Assembly
from .units import FixedBlock

__all__ = ["FIXED_SHARE", "place_fixed"]

FIXED_SHARE = 0.5
"""Most of what is left that a shrinkable block (the working state) takes when it cannot have its whole
size: seed 004 puts the state before the conversation, but the conversation still needs room."""


def place_fixed(asm: Assembly, blk: FixedBlock) -> bool:
    """Place one fixed block whole when it fits, else record it as a near-miss; whether it was placed.

    A block that can shrink (:attr:`FixedBlock.fit`, the working state) and does not fit
    whole in :data:`FIXED_SHARE` of what is left is re-rendered within it (seed 004's
    cutoff policy compacts the working state first), keeping its most important fields
    and saying what it left out; a note in the manifest says so too.
    """
    body = f"{blk.title}\n{blk.text}"
    cost = asm.tokenizer.count(body) + 2 + asm.opening()
    cap = int(asm.left.left * FIXED_SHARE)
    if blk.fit is not None and cost > cap:
        frame = cost - asm.tokenizer.count(blk.text)
        try:
            smaller = blk.fit(cap - frame)
        except StratamemError as exc:
            asm.notes.append(f"{blk.id} not shrunk to {cap - frame} tokens: {exc}")
        else:
            was, now = asm.tokenizer.count(blk.text), asm.tokenizer.count(smaller.text)
            asm.notes.append(f"{blk.id} shrunk to fit: {now} of {was} tokens")
            blk = smaller
            body = f"{blk.title}\n{blk.text}"
            cost = asm.tokenizer.count(body) + 2 + asm.opening()
    if not asm.left.take(cost):
        asm.misses.append(NearMiss(blk.id, blk.kind, cost, "over_budget"))
        return False
    asm.place(body, {blk.id})
    asm.items.append(ContextItem(blk.id, blk.kind, cost, blk.reason, format=blk.format))
    asm.shown.add(blk.id, blk.text)
    return True
