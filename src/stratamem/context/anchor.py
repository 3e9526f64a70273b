"""Where a growing, append-only run of units starts: arithmetic on stored sizes, no memory of earlier calls.

The cache layout (:mod:`stratamem.context.layout`) shows two runs that grow at
their end from call to call: the recent window (the session's turns from an
*anchor* on) and the summary ledger (settled summaries, oldest first). For a
provider to reuse the previous call's prompt, such a run must keep its start
until it has to move, then move far enough that it does not move again on the
next call. The start must also be the same whichever process asks (library,
CLI, MCP, HTTP), so it is computed from the stored units alone:

* the units' sizes, summed from the first one, give each unit a *position*;
* the grid points are the first units whose position reaches ``k * step``
  (``k = 0, 1, …``), moved on to the next unit that may open the run (for a
  window: a user turn or the start of a tool step);
* the start is the oldest grid point whose run, from there to the newest
  unit, fits ``room`` (and holds at most ``max_units`` units).

As units are appended the run grows until it no longer fits; then the start
jumps to the next grid point, ``step`` further on, and stays there while the
run regrows. Between jumps the run only grows at its end, so a prompt that
shows it changes only after its previous end. :func:`run_start` finds the
start; :func:`jumped_at` finds the unit whose arrival made it jump there.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

__all__ = ["grid_points", "jumped_at", "run_start"]


def grid_points(sizes: Sequence[int], step: int, opens: Callable[[int], bool] | None = None) -> list[int]:
    """The indices where a run may start, oldest first: the first unit at or past each multiple of ``step``.

    ``opens(i)``: whether unit ``i`` may open a run; a grid point that may not
    moves on to the next unit that may (and goes if there is none).
    """
    step = max(1, step)
    points: list[int] = []
    position, next_mark = 0, 0
    for i, size in enumerate(sizes):
        if position >= next_mark:
            j = i
            while j < len(sizes) and opens is not None and not opens(j):
                j += 1
            if j < len(sizes) and (not points or points[-1] != j):
                points.append(j)
            next_mark = (position // step + 1) * step
        position += max(0, size)
    return points


def _fits(sizes: Sequence[int], start: int, end: int, room: int, max_units: int | None) -> bool:
    """Whether units ``start..end`` (inclusive) fit ``room`` and ``max_units``."""
    if max_units is not None and end - start + 1 > max_units:
        return False
    return sum(sizes[start : end + 1]) <= room


def run_start(
    sizes: Sequence[int],
    room: int,
    step: int,
    *,
    opens: Callable[[int], bool] | None = None,
    max_units: int | None = None,
) -> int | None:
    """Index of the oldest grid point whose run to the last unit fits; ``None`` when none does.

    An empty ``sizes`` has no start (``None``).
    """
    if not sizes:
        return None
    end = len(sizes) - 1
    for point in grid_points(sizes, step, opens):
        if _fits(sizes, point, end, room, max_units):
            return point
    return None


def jumped_at(
    sizes: Sequence[int],
    start: int,
    room: int,
    step: int,
    *,
    opens: Callable[[int], bool] | None = None,
    max_units: int | None = None,
) -> int:
    """The first unit whose arrival put the run's start at ``start``: the call at which it jumped there.

    The start only moves forward as units arrive (an older grid point's run
    only grows), so it is ``start`` from the first unit at which the grid point
    before ``start`` stopped fitting, and ``start`` itself when no grid point
    comes before it.
    """
    points = [p for p in grid_points(sizes, step, opens) if p < start]
    if not points:
        return start
    before = points[-1]
    for end in range(start, len(sizes)):
        if not _fits(sizes, before, end, room, max_units):
            return end
    return len(sizes) - 1
