"""Conversation trees as paths: the conversation, and each abandoned branch apart.

Tools that let a user go back (a Claude Code rewind, an edited ChatGPT
prompt, a regenerated answer, Gemini's ``$rewindTo``) keep every version: the
messages form a tree by their parent links. The *conversation* is the path
from the root to the chosen leaf (the one the user last saw). Every other
message belongs to exactly one *branch*: a path that leaves an earlier path at
its fork and follows, at each later fork of its own, the child whose subtree
holds the newest leaf. Branches are kept (each becomes its own session, see
:func:`stratamem.ingest._common.branch_session`), never mixed into the
conversation.

Nodes are any hashable ids; ``order`` gives their age (file order), which
decides "newest".
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Branch", "split_tree"]

K = TypeVar("K", bound=Hashable)


@dataclass(frozen=True, slots=True)
class Branch(Generic[K]):
    """A path of the tree off another one."""

    nodes: list[K]
    """The path, oldest first."""
    fork: K | None
    """The node it branches from (on an earlier path), or ``None`` for another root."""


def split_tree(order: Sequence[K], parent: Mapping[K, K | None], leaf: K | None) -> tuple[list[K], list[Branch[K]]]:
    """The path from the root to ``leaf``, and every other node grouped into branches.

    Args:
        order: Every node, oldest first.
        parent: Each node's parent (``None`` or absent for a root; a parent
            that is not a node counts as none).
        leaf: The end of the conversation (default: the newest leaf).

    Returns:
        ``(conversation, branches)``; branches in the order their first node appears.
    """
    rank = {k: i for i, k in enumerate(order)}
    up: dict[K, K | None] = {k: (p if (p := parent.get(k)) in rank and p != k else None) for k in order}
    children: dict[K, list[K]] = {k: [] for k in order}
    for k in order:
        p = up[k]
        if p is not None:
            children[p].append(k)
    newest = _newest_leaves(order, children, rank)
    if leaf is None or leaf not in rank:
        leaves = [k for k in order if not children[k]]
        leaf = max(leaves, key=rank.__getitem__) if leaves else (order[-1] if order else None)
    main: list[K] = []
    seen: set[K] = set()
    node = leaf
    while node is not None and node not in seen:
        seen.add(node)
        main.append(node)
        node = up[node]
    main.reverse()
    branches: list[Branch[K]] = []
    # A node starts a branch when it is not placed and its parent is (or it has none); nodes caught
    # in a parent cycle never qualify and start branches of their own at the end.
    pending = [k for k in order if k not in seen]
    while pending:
        starts = [k for k in pending if up[k] is None or up[k] in seen] or pending[:1]
        for start in starts:
            if start in seen:
                continue
            path = [start]
            seen.add(start)
            node = start
            while True:
                nxt = [c for c in children[node] if c not in seen]
                if not nxt:
                    break
                node = max(nxt, key=lambda c: rank[newest[c]])
                seen.add(node)
                path.append(node)
            fork = up[start]
            branches.append(Branch(path, fork if fork in seen and fork not in path else None))
        pending = [k for k in pending if k not in seen]
    branches.sort(key=lambda b: rank[b.nodes[0]])
    return main, branches


def _newest_leaves(order: Sequence[K], children: Mapping[K, list[K]], rank: Mapping[K, int]) -> dict[K, K]:
    """For each node, the newest leaf of its subtree (itself when it has no children)."""
    newest: dict[K, K] = {}
    entered: set[K] = set()
    # Children may come before their parents in file order: settle every node by a walk that
    # finishes children first (iterative, so a deep tree does not hit the recursion limit; a node
    # entered twice is on a parent cycle and is settled as its own leaf).
    for root in order:
        stack: list[tuple[K, bool]] = [(root, False)]
        while stack:
            node, done = stack.pop()
            if node in newest:
                continue
            if done:
                leaves = [newest[c] for c in children[node] if c in newest]
                newest[node] = max(leaves, key=rank.__getitem__) if leaves else node
                continue
            if node in entered:
                newest[node] = node
                continue
            entered.add(node)
            stack.append((node, True))
            stack.extend((c, False) for c in children[node] if c not in newest)
    return newest
