"""What :meth:`stratamem.Memory.status` reports: counts, tokens, bytes, recall and summarization spend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .derived import Derived

__all__ = ["Status", "item_fields", "namespace_status", "spend_fields"]


@dataclass(frozen=True, slots=True)
class Status:
    """Counts, tokens and bytes of one namespace."""

    namespace: str
    """The namespace."""
    backend: str
    """Store backend (``sqlite`` or ``postgres``)."""
    sessions: int
    """Sessions in the namespace."""
    turns: int
    """Turns in the namespace."""
    tokens: int
    """Sum of the turns' exact token counts."""
    text_bytes: int
    """UTF-8 bytes of the stored turn content."""
    store_bytes: int
    """Bytes the whole store occupies on disk (all namespaces; 0 in memory)."""
    tokenizer: str
    """Tokenizer the counts were made with."""
    warnings: tuple[str, ...] = ()
    """Derived work a crash left undone (repairing now, turns without index, sessions without
    segments), then recent failures of derived work (recall index, pyramid) in this process;
    turns were kept."""
    embedder: str = "none"
    """Embedding model in use for recall (``none``: recall is lexical)."""
    embedding_dims: int = 0
    """Length of its vectors (0 without one)."""
    embedded_turns: int = 0
    """Turns whose vectors are stored in the recall index (the rest are embedded when it opens)."""
    summary_calls: int = 0
    """Model calls made to summarize this namespace's history (0 with a local summarizer)."""
    summary_input_tokens: int = 0
    """Input tokens those calls cost, as the provider reported them."""
    summary_output_tokens: int = 0
    """Output tokens those calls cost."""
    summary_tokens_saved: int = 0
    """Prompt tokens one prompt saves by showing the summarized segments as summaries.

    See ``stratamem.pyramid.spend``."""
    unindexed_turns: int = 0
    """Turns without their recall index row (or vector, with an embedder): a process was killed
    between a commit and its indexing. Made by the next context, search or ingest."""
    pending_sessions: int = 0
    """Sessions an interrupted ingest left without their segments and summaries (made by the next
    context, search or ingest)."""
    items_pending_review: int = 0
    """Auto-extracted memory items waiting for review."""
    items_review_cap: int = 0
    """At most this many wait (``items.max_pending_review``); past it the least salient are dropped."""
    extract_calls: int = 0
    """Model calls made to extract memory items (0 with the offline extractor)."""
    extract_input_tokens: int = 0
    """Input tokens those calls cost, as the provider reported them."""
    extract_output_tokens: int = 0
    """Output tokens those calls cost."""
    extract_failures: int = 0
    """Model extractions that failed (their segments fell back to the offline rules)."""
    part_bytes: Mapping[str, int] = field(default_factory=dict)
    """Bytes of the store per part, every namespace together: ``turns``, ``recall_index``, ``items``,
    ``pyramid``, ``manifests``, ``embedding_cache``, ``conversations``, ``other``; on SQLite also ``free``
    (WAL and unused pages) and ``archive`` (the pyramid's archive files). Empty when the backend
    cannot tell (a SQLite without ``dbstat``, a store in memory). See ``stratamem.store.part_bytes``."""

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        out = {k: getattr(self, k) for k in self.__slots__}
        out["warnings"] = list(self.warnings)
        out["part_bytes"] = dict(self.part_bytes)
        return out


def spend_fields(store: Any, namespace: str) -> dict[str, int]:
    """Summarization spend and savings for a :class:`Status` (none where the store keeps no pyramid)."""
    nodes = getattr(store, "nodes", None)
    if nodes is None:
        return {}
    from ..pyramid.spend import LevelSpend, SummarySpend

    spend = SummarySpend(
        namespace, tuple(LevelSpend(*r) for r in nodes.spend(namespace)), *nodes.summarized_tokens(namespace)
    )
    return {
        "summary_calls": spend.calls,
        "summary_input_tokens": spend.input_tokens,
        "summary_output_tokens": spend.output_tokens,
        "summary_tokens_saved": spend.tokens_saved,
    }


def item_fields(store: Any, namespace: str, review_cap: int) -> dict[str, int]:
    """The review queue and the extraction spend for a :class:`Status` (none where the store keeps no items)."""
    items = getattr(store, "items", None)
    if items is None:
        return {}
    calls, n_in, n_out, failures = items.item_spend(namespace)
    return {
        "items_pending_review": items.pending_count(namespace),
        "items_review_cap": review_cap,
        "extract_calls": calls,
        "extract_input_tokens": n_in,
        "extract_output_tokens": n_out,
        "extract_failures": failures,
    }


def namespace_status(tokenizer: str, derived: Derived) -> Status:
    """The :class:`Status` of a memory's namespace: the store's counts, the recall index's vectors and the spend.

    ``derived`` is the memory's derived data (:class:`~stratamem.memory.derived.Derived`):
    its store and namespace, its recent failures, the embedder the recall index
    embeds with (``None``: lexical recall) and the name its stored vectors carry,
    and what a crash left undone — turns without index rows, sessions an ingest
    left pending, turns this process is repairing now; each that is not 0 adds a warning.
    """
    store, namespace, embedder = derived.store, derived.namespace, derived.embedder
    warnings, index_model = tuple(derived.warnings), derived.live.indexer.model
    s = store.stats(namespace)
    embedded = store.embeddings.turns.counts(namespace)[1] if embedder is not None else 0
    (unindexed, pending), repairing = derived.pending(), derived.repairing
    notes = (
        [f"repairing {repairing} turns: indexing what an interrupted write left"] * bool(repairing)
        + [f"{unindexed} turns without index (made at the next context, search or ingest)"] * bool(unindexed)
        + [f"{pending} sessions without segments after an interrupted ingest (repaired next)"] * bool(pending)
    )
    return Status(
        namespace,
        store.backend,
        s.sessions,
        s.turns,
        s.tokens,
        s.text_bytes,
        store.size_bytes(),
        tokenizer,
        (*notes, *warnings),
        embedder=index_model or "none",
        embedding_dims=int(getattr(embedder, "dimensions", 0) or 0) if embedder is not None else 0,
        embedded_turns=embedded,
        unindexed_turns=unindexed,
        pending_sessions=pending,
        **spend_fields(store, namespace),
        **item_fields(store, namespace, derived.config.items.max_pending_review),
        part_bytes=getattr(store, "part_bytes", dict)(),
    )
