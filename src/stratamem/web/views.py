"""What the dashboard pages show, computed from library calls (no HTML here, no SQL).

Each function takes an open :class:`~stratamem.Memory` and returns plain data
for one template: the context inspector's sections and budget bar, the
session timeline with the pyramid above it, item lists with supersession
chains and the manifests that used an item, and the overview's counts.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import NotFoundError

if TYPE_CHECKING:
    from ..memory import Memory

__all__ = ["SECTION_COLORS", "inspect_manifest", "item_page", "overview", "timeline"]

# One colour per kind of prompt section; the bar and the legend share them.
SECTION_COLORS = {
    "instructions": "#6b7280",
    "state": "#0ea5e9",
    "checkpoint": "#8b5cf6",
    "item": "#f59e0b",
    "segment": "#10b981",
    "consolidation": "#059669",
    "recalled": "#ef4444",
    "window": "#3b82f6",
    "other": "#9ca3af",
}


def _section(item: Mapping[str, Any]) -> str:
    """Which section of the prompt a manifest item belongs to (by its kind and reason)."""
    kind, reason = item["kind"], item["reason"]
    if kind in ("instructions", "state", "checkpoint", "item", "segment", "consolidation"):
        return kind
    if kind == "turn":
        return "recalled" if "recall" in reason else "window"
    return "other"


def _preview(mem: Memory, items: list[Mapping[str, Any]], limit: int = 240) -> dict[str, str]:
    """A short text of each manifest item (turn text, node summary, item content), by id."""
    out: dict[str, str] = {}
    turn_ids = [i["turn_ids"][0] for i in items if i["kind"] == "turn" and i["turn_ids"]]
    turns = {t.id: t for t in mem.store.turns(mem.namespace, ids=turn_ids)} if turn_ids else {}
    for i in items:
        text = ""
        try:
            if i["kind"] == "turn" and i["turn_ids"] and i["turn_ids"][0] in turns:
                t = turns[i["turn_ids"][0]]
                text = f"[{t.role} #{t.seq} {t.session}] {t.text}"
            elif i["id"].startswith("node:"):
                node = mem.pyramid.node(int(i["id"].split(":")[1]))
                text = node.summary.text if node.summary else "(summary pending)"
            elif i["id"].startswith("item:"):
                text = mem.items.get(int(i["id"].split(":")[1])).content
        except NotFoundError:  # forgotten or pruned since the manifest was recorded
            text = "(no longer stored)"
        out[i["id"]] = text if len(text) <= limit else text[:limit] + " …"
    return out


def inspect_manifest(mem: Memory, data: Mapping[str, Any]) -> dict[str, Any]:
    """A manifest (``Manifest.to_dict()``) as sections with previews, a budget bar and near-misses."""
    items = list(data["items"])
    previews = _preview(
        mem,
        items
        + [
            dict(n, turn_ids=[int(n["id"].split(":")[1])] if n["id"].startswith("turn:") else [])
            for n in data["near_misses"]
        ],
    )
    sections: OrderedDict[str, dict[str, Any]] = OrderedDict()
    for i in items:
        name = _section(i)
        sec = sections.setdefault(name, {"name": name, "color": SECTION_COLORS[name], "tokens": 0, "items": []})
        sec["tokens"] += i["tokens"]
        sec["items"].append({**i, "preview": previews.get(i["id"], "")})
    budget = max(int(data["budget_tokens"]), 1)
    bar = [
        {"name": s["name"], "color": s["color"], "tokens": s["tokens"], "pct": round(100.0 * s["tokens"] / budget, 2)}
        for s in sections.values()
    ]
    # Section titles and per-message framing count too but belong to no item.
    framing = int(data["total_tokens"]) - sum(s["tokens"] for s in sections.values())
    if framing > 0:
        bar.append(
            {
                "name": "framing",
                "color": SECTION_COLORS["other"],
                "tokens": framing,
                "pct": round(100.0 * framing / budget, 2),
            }
        )
    free = budget - int(data["total_tokens"])
    return {
        "manifest": data,
        "sections": list(sections.values()),
        "bar": bar,
        "free": free,
        "free_pct": round(100.0 * free / budget, 2),
        "near_misses": [{**n, "preview": previews.get(n["id"], "")} for n in data["near_misses"]],
    }


def timeline(mem: Memory, session: str, *, segments: int = 40, open_limit: int = 200) -> dict[str, Any]:
    """A session's newest ``segments`` segments with their turns, the consolidations above them, and its open topic.

    Bounded for long sessions: older segments are counted, not shown, and at
    most ``open_limit`` open turns (the newest) are listed.
    """
    mem.store.session(mem.namespace, session)
    pyramid_on = mem.config.pyramid.enabled
    segs = (
        list(reversed(mem.pyramid.nodes(level=1, session=session, newest_first=True, limit=segments)))
        if pyramid_on
        else []
    )
    hidden = (
        (len(mem.pyramid.nodes(level=1, session=session)) - len(segs)) if pyramid_on and len(segs) == segments else 0
    )
    if pyramid_on:
        open_turns = mem.pyramid.open_turns(session)
    else:
        open_turns = list(reversed(mem.turns(session, limit=open_limit, newest_first=True)))
    open_count = len(open_turns)
    open_turns = open_turns[-open_limit:]
    turns = []
    if segs:
        first = segs[0].seq_range[0] if segs[0].seq_range else 1
        last = segs[-1].seq_range[1] if segs[-1].seq_range else first
        turns = mem.store.turns(mem.namespace, session, min_seq=first, max_seq=last)
    groups = []
    for seg in segs:
        lo, hi = seg.seq_range or (0, -1)
        groups.append({"segment": seg, "turns": [t for t in turns if lo <= t.seq <= hi]})
    total = max(sum(s.turn_count for s in segs) + open_count, 1)
    # Walk up the parent links: the consolidations covering the shown segments, by level.
    levels: dict[int, dict[int, Any]] = {}
    frontier = {s.parent_id for s in segs if s.parent_id is not None}
    while frontier:
        nxt: set[int] = set()
        for nid in frontier:
            node = mem.pyramid.node(nid)
            levels.setdefault(node.level, {})[node.id] = node
            if node.parent_id is not None:
                nxt.add(node.parent_id)
        frontier = nxt
    return {
        "session": session,
        "pyramid": pyramid_on,
        "turn_count": sum(s.turn_count for s in segs) + open_count,
        "groups": groups,
        "open_turns": open_turns,
        "open_count": open_count,
        "hidden_segments": hidden,
        "segments": [{"node": s, "pct": round(100.0 * s.turn_count / total, 2)} for s in segs],
        "open_pct": round(100.0 * open_count / total, 2),
        "levels": [
            {"level": lv, "nodes": sorted(levels[lv].values(), key=lambda n: n.id)}
            for lv in sorted(levels, reverse=True)
        ],
    }


def item_page(mem: Memory, item_id: int, *, manifests: int = 200) -> dict[str, Any]:
    """An item, its supersession chain (oldest first), and the recorded prompts that used it."""
    item = mem.items.get(item_id)
    chain = [item]
    seen = {item.id}
    cur = item
    while cur.supersedes and cur.supersedes[0] not in seen:
        try:
            cur = mem.items.get(cur.supersedes[0])
        except NotFoundError:
            break
        seen.add(cur.id)
        chain.insert(0, cur)
    cur = item
    while cur.superseded_by is not None and cur.superseded_by not in seen:
        try:
            cur = mem.items.get(cur.superseded_by)
        except NotFoundError:
            break
        seen.add(cur.id)
        chain.append(cur)
    key = f"item:{item.id}"
    used = [
        {
            "id": m.id,
            "session": m.session,
            "timestamp": m.data["timestamp"],
            "query": m.data.get("query"),
            "entry": next(i for i in m.data["items"] if i["id"] == key),
        }
        for m in mem.store.manifests.latest(mem.namespace, manifests)
        if any(i["id"] == key for i in m.data["items"])
    ]
    return {"item": item, "chain": chain, "used": used, "scanned": manifests}


def overview(mem: Memory) -> dict[str, Any]:
    """One namespace's counts, tier sizes, item tiers, failures and recent events."""
    status = mem.status()
    out: dict[str, Any] = {"status": status, "item_status": mem.items.status(), "tiers": [], "levels": [], "failed": []}
    if mem.config.pyramid.enabled:
        out["tiers"] = mem.pyramid.stats()
        out["levels"] = mem.pyramid.level_stats()
        out["failed"] = [n for n in mem.pyramid.nodes() if n.summary_status == "failed"]
    top = max([t.tokens for t in out["tiers"]] + [1])
    out["tier_bars"] = [
        {
            "tier": t.tier,
            "tokens": t.tokens,
            "view": t.view_tokens,
            "bytes": t.bytes,
            "nodes": t.nodes,
            "turns": t.turns,
            "pct": round(100.0 * t.tokens / top, 2),
            "view_pct": round(100.0 * t.view_tokens / top, 2),
        }
        for t in out["tiers"]
    ]
    events = [e for e in mem.events.recent() if e.namespace in (None, mem.namespace)]
    out["events"] = list(reversed(events[-30:]))
    out["failures"] = [e for e in events if e.kind.endswith("failed")][-20:]
    return out
