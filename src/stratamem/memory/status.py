"""What :meth:`stratamem.Memory.status` reports: counts, tokens, bytes, recall and summarization spend."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Status", "namespace_status", "spend_fields"]


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
    """Recent failures of derived work (recall index, pyramid) in this process; turns were kept."""
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


def namespace_status(
    store: Any, namespace: str, tokenizer: str, warnings: tuple[str, ...], embedder: Any, index_model: str | None
) -> Status:
    """The :class:`Status` of ``namespace``: the store's counts, the recall index's vectors and the spend.

    ``embedder`` is the model the recall index embeds with (``None``: lexical
    recall), ``index_model`` the name its stored vectors carry.
    """
    s = store.stats(namespace)
    embedded = store.embeddings.turns.counts(namespace)[1] if embedder is not None else 0
    return Status(
        namespace,
        store.backend,
        s.sessions,
        s.turns,
        s.tokens,
        s.text_bytes,
        store.size_bytes(),
        tokenizer,
        warnings,
        embedder=index_model or "none",
        embedding_dims=int(getattr(embedder, "dimensions", 0) or 0) if embedder is not None else 0,
        embedded_turns=embedded,
        **spend_fields(store, namespace),
        part_bytes=getattr(store, "part_bytes", dict)(),
    )
