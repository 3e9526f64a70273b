"""Forgetting: delete turns and everything derived from them, leaving no copy behind.

:func:`forget` removes, for the turns it is given (a list of ids, a whole
session, or a whole namespace):

* the canonical turns (and a forgotten session's row);
* their place in the pyramid: a node that keeps other turns is **rebuilt** —
  its extent (turn count, tokens, ids, times) is recomputed, a warm segment's
  content is re-encoded from what remains, its summary and summary embedding
  are cleared in the same transaction and summarized again afterwards from what
  remains; a node left with no turn is **removed**. A removed segment hands its
  sequence span to the next segment of its session (or the previous one), so
  every remaining turn stays in exactly one node per level and each level
  still covers a gap-free prefix;
* memory items whose every source turn is forgotten (and, for a session, the
  items labelled with it); an item with other sources left is **re-sourced**
  to those;
* recorded manifests that mention a forgotten turn, a rebuilt or removed node,
  or a removed item; the agent-loop state (checkpoint) of every session that
  lost a turn; embedding-cache rows keyed by a forgotten text's hash;
* archive frames: every day file holding a forgotten turn is rewritten without
  it (or deleted when nothing in it remains);
* the session logs of a project directory, and the in-memory recall, summary
  and item indexes of the ``Memory`` that forgets.

Crash safety. The database changes commit in one transaction; the archive
files change after it. Before the commit, each day file's new content is
staged beside it (``<file>.rewrite``) and the list of files to finish is
written into the store in the same transaction. After the commit the staged
files are renamed into place (or the day files deleted) and the list cleared.
A crash in between leaves the list in the store: :func:`finish_pending` (run
when a ``Memory`` first opens its pyramid, and before every forget) finishes
it, and discards staged files no committed forget refers to.

How the bytes go on each backend is the store's part
(:mod:`stratamem.store.sqlite.forget`, :mod:`stratamem.store.postgres.forget`);
``docs/forget.md`` says what each guarantees.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from .embed.cache import content_hash
from .errors import ArchiveError, ConfigError, NotFoundError, StratamemError, ValidationError
from .events import Event
from .expand import turn_ids
from .pyramid.archive import Archive
from .pyramid.tiers import encode_turns
from .records import StoredTurn, check_name
from .records.ids import parse_refs
from .records.nodes import Node
from .retrieve.corpus import TurnCorpus
from .store.forgetting import ForgetPlan, NodeRewrite

if TYPE_CHECKING:
    from .memory import Memory

__all__ = ["ForgetReport", "finish_pending", "forget"]

log = logging.getLogger("stratamem.forget")


@dataclass(frozen=True, slots=True)
class ForgetReport:
    """What a forget removed."""

    namespace: str
    """The namespace."""
    turns: int
    """Canonical turns deleted."""
    sessions: tuple[str, ...]
    """Sessions deleted (with all their turns)."""
    nodes_removed: int
    """Pyramid nodes left without turns and removed."""
    nodes_rebuilt: int
    """Pyramid nodes that kept other turns: extent recomputed, summary cleared and made again."""
    items_removed: int
    """Memory items removed (every source forgotten, or labelled with a forgotten session)."""
    items_resourced: int
    """Memory items re-sourced to the provenance that remains."""
    manifests_removed: int
    """Recorded manifests removed."""
    archive_files: tuple[str, ...]
    """Archive day files rewritten or deleted."""
    wal_truncated: bool
    """SQLite: the write-ahead log was checkpointed and truncated (``False`` if a reader held it)."""
    warnings: tuple[str, ...] = ()
    """Derived work that failed after the commit (e.g. a summary not made again); the forget stands."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["sessions"], out["archive_files"] = list(self.sessions), list(self.archive_files)
        out["warnings"] = list(self.warnings)
        return out


def _archive_of(mem: Memory) -> Archive | None:
    """The namespace's cold archive, where the store keeps one (a SQLite file beside it)."""
    if mem.config.pyramid.enabled:
        return mem.pyramid.archive
    path = getattr(mem.store, "path", None)
    return Archive(f"{path}.archive", mem.namespace) if isinstance(path, str) and path != ":memory:" else None


def finish_pending(store: Any, archive: Archive | None, namespace: str) -> list[str]:
    """Finish archive files a committed forget left behind (a crash after its commit); returns them.

    Runs under the store's write lock, so it never races a forget that is
    staging files before its own commit: staged files that no committed forget
    lists are left over from a forget that rolled back, and are deleted.

    Raises:
        ArchiveError: A file cannot be finished (the list stays; the next open retries).
        BackendError: The store failed.
    """
    forgetting = store.forgetting
    pending = forgetting.pending_archive(namespace)
    if archive is None:
        if pending:
            forgetting.clear_pending_archive(namespace, list(pending))
        return []
    if not pending and not archive.staged():
        return []
    with store.transaction():
        pending = forgetting.pending_archive(namespace)
        for name, action in sorted(pending.items()):
            archive.finish_rewrite(name, action)
        for name in archive.staged():
            if name not in pending:
                archive.discard_staged(name)
        if pending:
            forgetting.clear_pending_archive(namespace, list(pending))
    return sorted(pending)


def _check_target(turns: object, session: object, all_namespace: object) -> str:
    if not isinstance(all_namespace, bool):
        raise ValidationError(f"all_namespace must be true or false, got {all_namespace!r}", path="all_namespace")
    given = [name for name, value in (("turns", turns), ("session", session)) if value is not None]
    if all_namespace:
        given.append("all_namespace")
    if len(given) != 1:
        raise ValidationError(
            f"say exactly one of turns=[ids], session=name or all_namespace=True (got {', '.join(given) or 'none'})"
        )
    return given[0]


def forget(
    mem: Memory,
    *,
    turns: Sequence[int | str] | None = None,
    session: str | None = None,
    all_namespace: bool = False,
    vacuum: bool = False,
) -> ForgetReport:
    """Delete turns of ``mem``'s namespace and everything derived from them (see the module docstring).

    Exactly one target: ``turns`` (ids as search, contexts and manifests show
    them: ``turn:N``, ``node:N`` for the turns a summary covers, ``system:<hash>``
    for every copy of a system prompt; a bare number is a turn id), ``session``
    (a name) or ``all_namespace=True``. ``vacuum`` also rebuilds the storage afterwards
    (SQLite ``VACUUM``; PostgreSQL ``VACUUM FULL`` of the tables a forget
    touches, which locks them while it runs).

    Raises:
        ValidationError: No target, more than one, or a malformed one (an id that names no turns, e.g. ``item:3``).
        ConfigError: The store has no ``forgetting`` feature store.
        NotFoundError: A turn id, a node, a system prompt, the session or the
            namespace does not exist (nothing was forgotten).
        BackendError: The store failed; nothing was forgotten.
        ArchiveError: The database forget committed but an archive file could
            not be finished; the next open finishes it.
    """
    what = _check_target(turns, session, all_namespace)
    refs = parse_refs(turns, bare="turn", path="turns") if what == "turns" else []
    session_name = check_name(session, "session") if what == "session" else ""
    store, ns = mem.store, mem.namespace
    if not hasattr(store, "forgetting"):
        raise ConfigError(f"the {store.backend} store cannot forget (it has no forgetting feature store)")
    if not store.has_namespace(ns):
        raise NotFoundError(f"unknown namespace {ns!r}")
    ids = turn_ids(mem, refs)
    archive = _archive_of(mem)
    finish_pending(store, archive, ns)
    planner = _Planner(mem, archive)

    def build() -> ForgetPlan:
        if what == "turns":
            found = store.turns(ns, ids=ids)
            missing = sorted(set(ids) - {st.id for st in found})
            if missing:
                raise NotFoundError(
                    f"no turn {', '.join(map(str, missing[:10]))} in namespace {ns!r}; nothing was forgotten"
                )
            return planner.plan(found, sessions=())
        if what == "session":
            store.session(ns, session_name)  # NotFoundError for an unknown session
            return planner.plan(store.turns(ns, session_name), sessions=(session_name,))
        return planner.plan(list(store.iter_turns(ns)), sessions=(), whole=True)

    try:
        plan, truncated = store.forgetting.apply(ns, build)
    except BaseException:
        planner.discard_staged()
        raise
    files = planner.finish(plan)
    warnings = planner.after_commit(plan)
    if vacuum:
        store.forgetting.vacuum()
    report = ForgetReport(
        ns,
        len(plan.turn_ids),
        tuple(plan.sessions),
        len(plan.delete_nodes),
        len(plan.rewrite_nodes),
        len(plan.delete_items),
        len(plan.item_provenance),
        len(plan.delete_manifests),
        tuple(files),
        truncated,
        tuple(warnings),
    )
    # Counts and ids only: a forget event must not repeat what was forgotten.
    mem.events.emit(
        Event("memory.forgotten", {k: v for k, v in report.to_dict().items() if k != "warnings"}, namespace=ns)
    )
    return report


class _Planner:
    """Builds the :class:`ForgetPlan` for one forget (inside the store's write transaction)."""

    def __init__(self, mem: Memory, archive: Archive | None) -> None:
        self.mem, self.archive = mem, archive
        self.store, self.ns = mem.store, mem.namespace
        self.staged: list[str] = []
        self.resummarize: list[int] = []

    # --- the plan ------------------------------------------------------------------------

    def plan(self, gone: Sequence[StoredTurn], *, sessions: tuple[str, ...], whole: bool = False) -> ForgetPlan:
        forgotten = {st.id for st in gone}
        hashes = {h for st in gone for h in (content_hash(TurnCorpus.text(st)), content_hash(st.text))}
        nodes = self.store.nodes
        delete_nodes: list[int] = []
        rewrites: list[NodeRewrite] = []
        spans: dict[int, tuple[int, int]] = {}
        refs: dict[int, str | None] = {}
        pending: dict[str, str] = {}
        touched: set[int] = set()
        if whole:
            for node in nodes.list(self.ns):
                touched.add(node.id)
                if node.summary is not None:
                    hashes.add(content_hash(node.summary.text))
            if self.archive is not None:
                pending = {p.name: "delete" for p in self.archive.files()}
        elif forgotten:
            delete_nodes, rewrites, spans, touched = self._nodes(forgotten, hashes)
            refs, pending = self._archive(forgotten, set(delete_nodes), touched)
        items_gone, resourced = self._items(forgotten, sessions, whole, hashes)
        manifests = self._manifests(forgotten, touched, set(items_gone), whole)
        affected_sessions = sorted({st.session for st in gone})
        return ForgetPlan(
            self.ns,
            tuple(sorted(forgotten)),
            sessions=sessions,
            whole_namespace=whole,
            delete_nodes=tuple(delete_nodes),
            rewrite_nodes=tuple(rewrites),
            segment_spans=spans,
            archive_refs=refs,
            delete_items=tuple(items_gone),
            item_provenance=resourced,
            delete_manifests=tuple(manifests),
            conversations=tuple(affected_sessions),
            embedding_hashes=tuple(sorted(hashes)),
            archive_pending=pending,
        )

    def _nodes(
        self, forgotten: set[int], hashes: set[str]
    ) -> tuple[list[int], list[NodeRewrite], dict[int, tuple[int, int]], set[int]]:
        nodes, ns, store = self.store.nodes, self.ns, self.store
        delete: list[int] = []
        rewrites: dict[int, NodeRewrite] = {}
        # New extent per surviving node: (tokens, start, end), for the consolidations above it.
        extent: dict[int, tuple[int, Any, Any]] = {}
        touched: set[int] = set()
        by_level: dict[int, set[int]] = {}
        for level in nodes.levels(ns):
            cov = nodes.coverage(ns, level)
            hit = {cov[t] for t in forgotten if t in cov}
            if hit:
                by_level[level] = hit
        deleted_segments: list[Node] = []
        for level in sorted(by_level):
            for node_id in sorted(by_level[level]):
                node = nodes.get(ns, node_id)
                touched.add(node_id)
                if node.summary is not None:
                    hashes.add(content_hash(node.summary.text))
                    self.resummarize.append(node_id)
                left = [t for t in nodes.turn_ids(ns, node_id) if t not in forgotten]
                if not left:
                    delete.append(node_id)
                    if level == 1:
                        deleted_segments.append(node)
                    continue
                if level == 1:
                    rows = store.turns(ns, ids=left)
                    tokens, start, end = (
                        sum(t.tokens for t in rows),
                        min(t.timestamp for t in rows),
                        max(t.timestamp for t in rows),
                    )
                    warm, view = None, None
                    held = nodes.warm_content(ns, node_id) if node.tier in ("warm", "cold") else None
                    if held is not None:  # a warm copy, or a cold one (cold_format: ctf), in its own format
                        warm = encode_turns(rows, held[0])
                        view = self.mem.tokenizer.count(warm[1])
                    rewrites[node_id] = NodeRewrite(
                        node_id, len(left), tokens, left[0], left[-1], start, end, node.seq_range, warm, view
                    )
                else:
                    kids = [k for k in nodes.list(ns, parent_id=node_id) if k.id not in delete]
                    parts = [extent.get(k.id, (k.tokens, k.start, k.end)) for k in kids]
                    tokens, start, end = (sum(p[0] for p in parts), min(p[1] for p in parts), max(p[2] for p in parts))
                    rewrites[node_id] = NodeRewrite(node_id, len(left), tokens, left[0], left[-1], start, end, None)
                extent[node_id] = (tokens, start, end)
        spans = self._hand_over(deleted_segments, set(delete), rewrites)
        return delete, list(rewrites.values()), spans, touched

    def _hand_over(
        self, deleted: Sequence[Node], gone: set[int], rewrites: dict[int, NodeRewrite]
    ) -> dict[int, tuple[int, int]]:
        """Give each removed segment's sequence span to a surviving neighbour in its session.

        The next segment takes it (its span starts earlier); without one, the
        previous segment's span grows. With no segment left in the session, the
        span goes with it and the next seal starts from sequence 1 again.
        """
        spans: dict[int, list[int]] = {}
        for session in sorted({n.session for n in deleted if n.session is not None}):
            segs = sorted(
                self.store.nodes.list(self.ns, level=1, session=session),
                key=lambda n: n.seq_range[0] if n.seq_range else 0,
            )
            live = [n for n in segs if n.id not in gone and n.seq_range is not None]
            for dead in (n for n in segs if n.id in gone and n.seq_range is not None):
                lo, hi = dead.seq_range
                after = [n for n in live if n.seq_range[0] > hi]
                before = [n for n in live if n.seq_range[1] < lo]
                heir = after[0] if after else (before[-1] if before else None)
                if heir is None:
                    continue
                span = spans.setdefault(heir.id, list(heir.seq_range))
                span[0], span[1] = min(span[0], lo), max(span[1], hi)
        out: dict[int, tuple[int, int]] = {}
        for node_id, (lo, hi) in spans.items():
            if node_id in rewrites:
                r = rewrites[node_id]
                rewrites[node_id] = NodeRewrite(
                    r.node_id,
                    r.turn_count,
                    r.tokens,
                    r.first_turn_id,
                    r.last_turn_id,
                    r.start,
                    r.end,
                    (lo, hi),
                    r.warm,
                    r.view_tokens,
                )
            else:
                out[node_id] = (lo, hi)
        return out

    def _archive(
        self, forgotten: set[int], deleted: set[int], touched: set[int]
    ) -> tuple[dict[int, str | None], dict[str, str]]:
        """Stage rewrites of the day files that hold a forgotten turn; returns new references and actions."""
        if self.archive is None:
            return {}, {}
        cold = self.store.nodes.list(self.ns, level=1, tier="cold")
        dirty = {
            Archive.file_of(n.archive_ref)
            for n in cold
            if n.archive_ref is not None and n.id in touched and _valid_ref(n.archive_ref)
        }
        refs: dict[int, str | None] = {}
        pending: dict[str, str] = {}
        for name in sorted(dirty):
            holders: dict[str, list[int]] = {}
            for n in cold:
                if n.archive_ref is not None and _valid_ref(n.archive_ref) and Archive.file_of(n.archive_ref) == name:
                    holders.setdefault(n.archive_ref, []).append(n.id)
            frames: list[dict[int, list[Any]]] = []
            owners: list[list[int]] = []
            for ref in sorted(holders, key=_offset):
                try:
                    frame = self.archive.read(ref)
                except ArchiveError as exc:
                    # Unreadable already: its nodes keep their canonical turns only.
                    log.warning("archive frame %s unreadable while forgetting; dropped: %s", ref, exc)
                    frame = {}
                keep = {
                    nid: [r for r in frame.get(nid, []) if r.get("id") not in forgotten]
                    for nid in holders[ref]
                    if nid not in deleted
                }
                keep = {nid: recs for nid, recs in keep.items() if recs}
                for nid in holders[ref]:
                    if nid not in deleted and nid not in keep:
                        refs[nid] = None
                if keep:
                    frames.append(keep)
                    owners.append(list(keep))
            if frames:
                new_refs = self.archive.stage_rewrite(name, frames)
                self.staged.append(name)
                for ids, ref in zip(owners, new_refs, strict=True):
                    refs.update(dict.fromkeys(ids, ref))
                pending[name] = "replace"
            else:
                pending[name] = "delete"
        return refs, pending

    def _items(
        self, forgotten: set[int], sessions: tuple[str, ...], whole: bool, hashes: set[str]
    ) -> tuple[list[int], dict[int, tuple[int, ...]]]:
        gone: list[int] = []
        resourced: dict[int, tuple[int, ...]] = {}
        for it in self.store.items.select(self.ns):
            prov = tuple(it.provenance)
            left = tuple(p for p in prov if p not in forgotten)
            if whole or (it.session is not None and it.session in sessions) or (prov and not left):
                gone.append(it.id)
                hashes.add(content_hash(it.content))
            elif len(left) < len(prov):
                resourced[it.id] = left
        return gone, resourced

    def _manifests(self, forgotten: set[int], nodes: set[int], items: set[int], whole: bool) -> list[int]:
        if whole:
            return []  # the store deletes every manifest of the namespace
        names = {f"turn:{t}" for t in forgotten} | {f"node:{n}" for n in nodes} | {f"item:{i}" for i in items}
        out = []
        for m in self.store.manifests.latest(self.ns, limit=2**31 - 1):
            entries = [*m.data.get("items", ()), *m.data.get("near_misses", ())]
            if any(e.get("id") in names or forgotten.intersection(e.get("turn_ids", ())) for e in entries):
                out.append(m.id)
        return out

    # --- after the commit -------------------------------------------------------------------

    def discard_staged(self) -> None:
        """The transaction rolled back: staged files name nothing committed."""
        for name in self.staged:
            try:
                self.archive.discard_staged(name)  # type: ignore[union-attr]
            except ArchiveError as exc:  # finish_pending deletes it on the next open
                log.warning("could not discard a staged archive rewrite: %s", exc)

    def finish(self, plan: ForgetPlan) -> list[str]:
        """Put the staged files in place (or delete day files), then clear the journal."""
        if not plan.archive_pending:
            return []
        if self.archive is None:
            self.store.forgetting.clear_pending_archive(self.ns, list(plan.archive_pending))
            return []
        for name, action in sorted(plan.archive_pending.items()):
            self.archive.finish_rewrite(name, action)
        self.store.forgetting.clear_pending_archive(self.ns, list(plan.archive_pending))
        return sorted(plan.archive_pending)

    def after_commit(self, plan: ForgetPlan) -> list[str]:
        """Drop in-memory indexes, make summaries again, rewrite session logs; returns warnings."""
        mem = self.mem
        warnings: list[str] = []
        mem._reset_derived()
        if mem.config.pyramid.enabled and plan.rewrite_nodes and mem.config.pyramid.auto_summarize:
            kept = {r.node_id for r in plan.rewrite_nodes}
            try:
                mem.pyramid.summarize_nodes([n for n in self.resummarize if n in kept])
            except StratamemError as exc:
                warnings.append(f"summaries not made again: {type(exc).__name__}: {exc}")
        if mem.project_dir is not None:
            warnings += _rewrite_logs(mem, plan)
        return warnings


def _valid_ref(ref: str) -> bool:
    try:
        Archive.file_of(ref)
    except ArchiveError:
        return False
    return True


def _offset(ref: str) -> int:
    return int(ref.split("@", 1)[1].split("+", 1)[0])


def _rewrite_logs(mem: Memory, plan: ForgetPlan) -> list[str]:
    """Rewrite the project's session logs of the namespace without the forgotten turns."""
    from .state.sessionlog import SessionLogs

    logs = SessionLogs(mem.project_dir, mem.namespace, workdir=mem.config.state.workdir)  # type: ignore[arg-type]
    if not logs.directory.is_dir():
        return []
    try:
        gone: Mapping[str, Any] = dict.fromkeys(plan.sessions)
        if plan.whole_namespace:
            gone = {p.stem: None for p in logs.directory.glob("*.jsonl")}
        for name in gone:
            logs.path(name).unlink(missing_ok=True)
        if not plan.whole_namespace:
            logs.rebuild(mem.store)
    except (OSError, StratamemError) as exc:
        return [f"session logs not rewritten: {type(exc).__name__}: {exc}"]
    return []
