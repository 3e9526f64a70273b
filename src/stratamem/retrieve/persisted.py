"""The recall index kept in the store, so a new process opens it instead of rebuilding it.

Turns are analysed and embedded when they are written (:meth:`TurnIndexer.index`,
called by ``Memory`` right after each commit, in batches), and what that
produced — each turn's index terms and its vector as int8 codes
(:mod:`stratamem.embed.quantize`) — is stored beside the turns
(``store.embeddings.turns``, migration ``m010_recall_index``). Opening the
index (:meth:`TurnIndexer.open`) then reads turns, terms and vectors and
only rebuilds the derived arrays (postings, window norms, session sums) in
numpy; turns without a row (written before this existed, by a process whose
embedder failed, or lost to a crash between the two commits) are analysed
and embedded then, and their rows stored.

The in-memory index of the writing process is fed the *stored* vectors (their
int8 codes, which it keeps as they are: :mod:`stratamem.retrieve.vector_rows`),
so it scores exactly like an index opened from the store later.

A namespace's rows record which model made the vectors and which word
analysis made the terms (:data:`~stratamem.retrieve.corpus.ANALYZER`):
opening with another model re-embeds, and a changed analysis re-analyses.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._gcpause import gc_paused
from ..embed import model_name
from ..embed.quantize import encode_int6, is_turn_blob, turn_codes
from ..errors import ModelError, StratamemError
from ..records import StoredTurn
from ..store.term_ids import StoredTerms
from .corpus import ANALYZER, TurnCorpus
from .engine import HybridIndex, Weights
from .eventdates import encode_events, event_spans
from .lexical import analyze
from .passage_rows import PassageRows
from .passages import is_long
from .sentence_rows import SentenceRows

__all__ = ["PASSAGE_WEIGHTS", "IndexedBatch", "TurnIndexer"]

BATCH = 1024
"""Turns analysed, embedded and stored per transaction (bigger calls let the encoder sort
more texts by length and keep both threads busy to the end of each call)."""

PASSAGE_WEIGHTS = Weights(vector=0.0, vector_passage=1.5)
"""The ranking of an index that embeds passages: the turn vector's weight moves to the best
cosine over the turn and its passages (equal to the turn cosine for every short turn)."""


@dataclass(frozen=True, slots=True)
class IndexedBatch:
    """What :meth:`TurnIndexer.index` produced for a list of turns."""

    terms: list[list[str]]
    """Index terms per turn."""
    vectors: np.ndarray | None
    """The stored int8 codes of each turn's vector (:func:`~stratamem.embed.quantize.int8_codes`);
    ``None`` without an embedder or when embedding failed."""
    error: Exception | None = None
    """Why the vectors are missing, if the embedder failed (the terms were still stored)."""
    passages: dict[int, np.ndarray] | None = None
    """Passage vectors (int8 codes) of the long turns, by turn id (:mod:`stratamem.retrieve.passage_rows`)."""
    sentences: dict[int, np.ndarray] | None = None
    """Sentence vectors (4-bit codes as int8) of the short turns that have them, by turn id
    (:mod:`stratamem.retrieve.sentences`)."""
    events: list[str] | None = None
    """The stored events string of each turn (:mod:`stratamem.retrieve.eventdates`)."""


def _embed(embedder: Any, texts: Sequence[str]) -> np.ndarray:
    """Embed texts as unit float32 rows; any failure of the pluggable model is a :class:`ModelError`."""
    try:
        vec = np.asarray(embedder.embed_batch(list(texts)), dtype=np.float32)
    except Exception as exc:  # a pluggable model may raise anything: one error type for callers
        raise ModelError(f"embedding {len(texts)} turn(s) failed: {type(exc).__name__}: {exc}") from exc
    if vec.ndim != 2 or len(vec) != len(texts) or not np.isfinite(vec).all():
        raise ModelError(f"embedder returned shape {vec.shape} (or non-finite values) for {len(texts)} turn(s)")
    return vec


class TurnIndexer:
    """Persists and opens one namespace's recall index.

    Args:
        store: The store (its ``embeddings.turns`` feature store keeps the rows).
        namespace: The namespace.
        embedder: Embeddings for the vector signals, or ``None`` (terms only).
        passages: Also embed and store the passages of long turns, and rank by
            the best of a turn's and its passages' vectors (``vector_passage``)
            instead of the turn vector alone. Off by default: see
            ``embedding.passages`` in :mod:`stratamem.config`.
        sentences: Also embed and store the sentences of short turns, which
            questions needing several turns rank by (``embedding.sentences``).
    """

    def __init__(
        self, store: Any, namespace: str, embedder: Any, *, passages: bool = False, sentences: bool = False
    ) -> None:
        self.store, self.namespace, self.embedder = store, namespace, embedder
        self.passages = bool(passages)
        self.sentences = bool(sentences)
        self._meta_checked = False

    @property
    def _rows(self) -> Any:
        return self.store.embeddings.turns

    @property
    def model(self) -> str:
        """Name the vectors are recorded under (``""`` without an embedder)."""
        if self.embedder is None:
            return ""
        return model_name(self.embedder)

    def _dims(self) -> int:
        """Components of the namespace's turn vectors: the embedder's, else the recorded ones (0: unknown)."""
        if self.embedder is not None and (dims := int(getattr(self.embedder, "dimensions", 0) or 0)):
            return dims
        meta = self._rows.meta(self.namespace)
        return int(meta.dims) if meta is not None else 0

    def _check_meta(self) -> None:
        """Make the namespace's recorded model and analyser this indexer's (stale rows are dropped)."""
        if self._meta_checked:
            return
        from ..store.base_turn_index import IndexMeta

        old = self._rows.meta(self.namespace)
        if self.embedder is None:
            # Terms only: vectors another process made stay valid for it.
            want = IndexMeta(old.model, old.dims, ANALYZER) if old is not None else IndexMeta("", 0, ANALYZER)
        else:
            want = IndexMeta(self.model, int(getattr(self.embedder, "dimensions", 0) or 0), ANALYZER)
        if old != want:
            self._rows.set_meta(self.namespace, want)
        self._meta_checked = True

    def index(self, turns: Sequence[StoredTurn], progress: Callable[[int], object] | None = None) -> IndexedBatch:
        """Analyse, embed and store the index rows of newly committed turns, in batches.

        An embedder failure does not stop the terms from being stored: the
        rest of the turns get rows without vectors (embedded when the index
        is next opened) and the failure is returned, not raised.

        Raises:
            BackendError: Storing the rows failed.
        """
        self._check_meta()
        all_terms: list[list[str]] = []
        all_events: list[str] = []
        dims = 0
        blobs: list[bytes | None] = []
        made: dict[int, bytes] = {}
        error: Exception | None = None
        from ..store.base_turn_index import TurnIndexRow

        for lo in range(0, len(turns), BATCH):
            chunk = turns[lo : lo + BATCH]
            texts = [TurnCorpus.text(st) for st in chunk]
            terms = [analyze(t) for t in texts]
            events = [encode_events(event_spans(st.text, st.timestamp)) for st in chunk]
            coded: list[bytes | None] = [None] * len(chunk)
            counts: list[int | None] = [None] * len(chunk)
            if self.embedder is not None and error is None:
                try:
                    embedded = _embed(self.embedder, texts)
                    dims = int(embedded.shape[1])
                    coded = list(encode_int6(embedded))
                    if self.sentences:
                        # Stored before the rows that count them: a crash in between re-makes them on open.
                        rows = self._sentence_rows()
                        made_counts, blobs_s = rows.make(chunk, [len(t) for t in terms])
                        rows.put(blobs_s, dims)
                        counts, made = list(made_counts), {**made, **blobs_s}
                except ModelError as exc:
                    error = exc
            self._rows.put(
                self.namespace,
                [
                    TurnIndexRow(st.id, " ".join(t), b, e, c)
                    for st, t, b, e, c in zip(chunk, terms, coded, events, counts, strict=True)
                ],
            )
            all_terms.extend(terms)
            all_events.extend(events)
            blobs.extend(coded)
            if progress is not None:
                progress(len(chunk))
        vectors = None
        if self.embedder is not None and error is None and blobs:
            vectors = turn_codes([b for b in blobs if b is not None], dims)
        passages = sentences = None
        if vectors is not None and self.passages:
            try:
                passages = self._passage_rows().write(turns, all_terms, vectors.shape[1])
            except ModelError as exc:  # the turn rows are stored; passages are made when the index opens
                error = exc
        if vectors is not None and self.sentences and error is None:
            sentences = SentenceRows.decode(made, vectors.shape[1])
        return IndexedBatch(all_terms, vectors, error, passages, sentences, all_events)

    def _passage_rows(self) -> PassageRows:
        return PassageRows(self.store, self.namespace, self.embedder, self.model)

    def _sentence_rows(self) -> SentenceRows:
        return SentenceRows(self.store, self.namespace, self.embedder, self.model)

    def open(self, weights: Any = None, on_store_error: Callable[[Exception], None] | None = None) -> HybridIndex:
        """The namespace's recall index, from its turns and stored rows.

        Rows missing or stale are made now and stored; if storing them fails
        (a read-only store), ``on_store_error`` is told and the index is still
        returned.

        Raises:
            ModelError: Turns need embedding and the embedder failed.
        """
        # A bulk read of a few objects per turn, none of them cyclic: the collector's full
        # passes over them cost more than the read itself at 100k turns (_gcpause).
        with gc_paused():
            return self._open(weights, on_store_error)

    def _open(self, weights: Any, on_store_error: Callable[[Exception], None] | None) -> HybridIndex:
        # Keys, not turns: ranking needs only ids, sessions, speakers and times; a
        # recalled turn is read in full when it is a hit (HybridIndex's loader).
        try:
            self._check_meta()
        except StratamemError as exc:
            if on_store_error is not None:
                on_store_error(exc)
        # One ordered read of keys, term ids, vectors, events and sentence counts. Terms stay ids: the index finds a
        # term's postings when a query first asks for it (StoredTermsIndex).
        turns: list[Any]
        turns, stored, present, blobs, events, counts = self._rows.open_rows(self.namespace)
        if turns and (meta := self._rows.meta(self.namespace)) is not None and meta.analyzer != ANALYZER:
            # Made by another analysis (read-only store: the meta could not be updated).
            none: list[Any] = [None] * len(turns)
            present, blobs, events, counts = [False] * len(turns), list(none), list(none), list(none)
        dims = self._dims()
        stale = {i for i, b in enumerate(blobs) if b is not None and dims and not is_turn_blob(b, dims)}
        stored_s = self._sentence_rows().load(int(dims)) if self.sentences and self.embedder and dims else {}
        sizes = np.diff(stored.offsets)  # each turn's term count, read off the stored ids
        # Sentence vectors never made (NULL count) or made by another model (no row under this one).
        need_s = {
            i
            for i in range(len(turns))
            if self.sentences
            and self.embedder is not None
            and (
                (counts[i] is None and (not present[i] or not is_long(int(sizes[i]))))
                or (counts[i] and turns[i].id not in stored_s)
            )
        }
        # Rows written before event dates were stored (events NULL) need the text once more.
        todo = [
            i
            for i in range(len(turns))
            if not present[i]
            or events[i] is None
            or i in need_s
            or (self.embedder is not None and (blobs[i] is None or i in stale))
        ]
        terms: StoredTerms | list[list[str]] = stored
        if todo:
            full = {
                st.id: st
                for lo in range(0, len(todo), 500)
                for st in self.store.turns(self.namespace, ids=[turns[i].id for i in todo[lo : lo + 500]])
            }
            for i in todo:
                turns[i] = full[turns[i].id]
            lists: list[list[str] | None] = [stored.terms(i) if present[i] else None for i in range(len(turns))]
            self._fill(turns, (lists, blobs, events, counts), stale, need_s, stored_s, todo, on_store_error)
            if not all(present):
                terms = [t or [] for t in lists]
        if weights is None and self.passages and self.embedder is not None:
            weights = PASSAGE_WEIGHTS
        index = HybridIndex(self.embedder, weights, loader=self._load_turns, sentences=self.sentences)
        vectors = None
        if self.embedder is not None and turns:
            vectors = turn_codes(blobs, dims)
        passages = sentences = None
        if vectors is not None and index.weights.vector_passage > 0:
            passages = self._passage_rows().read(turns, _lists(terms), vectors.shape[1], on_store_error)
        if vectors is not None and index.sentences:
            sentences = SentenceRows.decode(stored_s, vectors.shape[1])
        index.add_turns(turns, terms=terms, vectors=vectors, passages=passages, sentences=sentences, events=events)
        return index

    def _load_turns(self, ids: Sequence[int]) -> list[StoredTurn]:
        return self.store.turns(self.namespace, ids=list(ids))

    def _fill(
        self,
        turns: list[StoredTurn],
        columns: tuple[list[list[str] | None], list[bytes | None], list[str | None], list[int | None]],
        stale: set[int],
        need_s: set[int],
        stored_s: dict[int, bytes],
        todo: list[int],
        on_store_error: Callable[[Exception], None] | None,
    ) -> None:
        """Make what the rows at ``todo`` lack (terms, vectors, events, sentence vectors: ``need_s``,
        added to ``stored_s``) from the full turns, in place, and store it."""
        from ..store.base_turn_index import TurnIndexRow

        terms, blobs, events, counts = columns

        store_ok = not getattr(self.store, "read_only", False)  # a read-only store: made for this process only
        for lo in range(0, len(todo), BATCH):
            part = todo[lo : lo + BATCH]
            texts = [TurnCorpus.text(turns[i]) for i in part]
            for i, text in zip(part, texts, strict=True):
                if terms[i] is None:
                    terms[i] = analyze(text)
                if events[i] is None:
                    events[i] = encode_events(event_spans(turns[i].text, turns[i].timestamp))
            embed = [i for i in part if blobs[i] is None or i in stale] if self.embedder is not None else []
            if embed:
                coded = encode_int6(_embed(self.embedder, [TurnCorpus.text(turns[i]) for i in embed]))
                for i, blob in zip(embed, coded, strict=True):
                    blobs[i] = blob
            sent = [i for i in part if i in need_s]
            made: dict[int, bytes] = {}
            if sent:
                made_counts, made = self._sentence_rows().make(
                    [turns[i] for i in sent], [len(terms[i] or []) for i in sent]
                )
                for i, n in zip(sent, made_counts, strict=True):
                    counts[i] = n
                stored_s.update(made)
            if store_ok:
                try:
                    if made:
                        self._sentence_rows().put(made, self._dims())
                    self._rows.put(
                        self.namespace,
                        [
                            TurnIndexRow(turns[i].id, " ".join(terms[i] or []), blobs[i], events[i], counts[i])
                            for i in part
                        ],
                    )
                except StratamemError as exc:
                    store_ok = False
                    if on_store_error is not None:
                        on_store_error(exc)


def _lists(terms: StoredTerms | list[list[str]]) -> list[list[str]]:
    """Every turn's terms as lists (what the passage rows are checked against)."""
    if isinstance(terms, StoredTerms):
        return [terms.terms(i) for i in range(len(terms))]
    return terms
