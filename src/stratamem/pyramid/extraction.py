"""Memory items from the pyramid's segments: the extractor runs on each summarized segment's turns.

:class:`_Extraction` is the part of :class:`~stratamem.pyramid.consolidate.Pyramid`
that turns segments into auto-extracted memory items, when
``pyramid.auto_extract_facts`` is on and the store keeps items. The memory's
extractor (:mod:`stratamem.items.extract`; offline rules by default) reads the
segment's turns, with the turn before it as context (and, for the offline
rules, the turns' stored vectors: which statements are about the same thing);
items do not depend on which summarizer ran. A group of segments summarized together is extracted
together: an extractor with ``extract_groups`` (the model-powered one) gets
them in one call.

Failures never lose a turn and stay visible:

* the extractor fails (a model call, an answer it cannot read): those
  segments fall back to the offline rules, an ``items.extract_failed`` event
  names the extractor and the error type, and the failure is counted in the
  namespace's ``item_spend`` (``Memory.status().extract_failures``);
* storing the items fails: the node is recorded ``failed`` (so
  :meth:`~stratamem.pyramid.consolidate.Pyramid.retry_failed` tries again) and
  ``items.extract_failed`` says why; the summary and the turns stay.

Only a segment whose summary stands is mined (as before the extractor was
pluggable): a failed node is extracted when its retry succeeds, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..events import Event, EventBus
from ..records import StoredTurn
from ..records.candidates import Candidate
from ..records.nodes import Node
from .turn_vectors import stored_turn_vectors

if TYPE_CHECKING:
    from ..config import Config
    from ..embed.prefetch import PrefetchedEmbedder
    from ..items.extract import Extractor
    from ..tokens import Tokenizer

__all__: list[str] = []


class _Extraction:
    """Segments to memory items (a part of ``Pyramid``)."""

    if TYPE_CHECKING:  # set by Pyramid.__init__; the methods are Pyramid's and _Reads'
        store: Any
        namespace: str
        config: Config
        tokenizer: Tokenizer
        events: EventBus
        extractor: Extractor
        _batched: PrefetchedEmbedder | None
        _item_api: Any
        _candidates: dict[int, list[Candidate]]
        _model: str

        def _event(self, event_kind: str, **data: Any) -> Event: ...

        def expand(self, node_id: int) -> list[StoredTurn]: ...

    def _extracts(self) -> bool:
        return self.config.pyramid.auto_extract_facts and hasattr(self.store, "items")

    def _before(self, node: Node) -> list[StoredTurn]:
        """The turn just before a segment (the extractor's context: did it ask what the segment answers?)."""
        if node.session is None or node.seq_range is None or node.seq_range[0] <= 1:
            return []
        return self.store.turns(self.namespace, node.session, max_seq=node.seq_range[0] - 1, newest_first=True, limit=1)

    def _extract_group(self, nodes: Sequence[Node]) -> None:
        """Candidates of a group's segments (one call when the extractor batches), kept for :meth:`_store_items`."""
        if not nodes or not self._extracts():
            return
        work = [(n, self.expand(n.id), self._before(n)) for n in nodes]
        batch = getattr(self.extractor, "extract_groups", None)
        try:
            if batch is not None:
                found = batch([(turns, before) for _, turns, before in work])
            else:
                found = [self._extract_one(self.extractor, turns, before) for _, turns, before in work]
        except Exception as exc:  # noqa: BLE001 - a pluggable extractor (a model): fall back to the rules, visibly
            self._extract_failed(nodes, exc)
            found = [self._extract_one(self._rules(), turns, before) for _, turns, before in work]
        finally:
            self._record_extract_spend()
        for (node, _, _), cands in zip(work, found, strict=True):
            self._candidates[node.id] = list(cands)

    def _extract_one(self, extractor: Extractor, turns: list[StoredTurn], before: list[StoredTurn]) -> list[Candidate]:
        """One segment's candidates; an extractor that reads vectors gets the turns' stored ones (no model call)."""
        if not getattr(extractor, "reads_vectors", False):
            return extractor.extract(turns, before=before)
        vectors = stored_turn_vectors(self.store, self.namespace, self._model, [t.id for t in turns])
        return extractor.extract(turns, before=before, vectors=vectors)  # type: ignore[call-arg]

    def _extract_failed(self, nodes: Sequence[Node], exc: BaseException) -> None:
        name = getattr(self.extractor, "name", type(self.extractor).__name__)
        for node in nodes:
            self.events.emit(
                self._event("items.extract_failed", node_id=node.id, extractor=name, error=type(exc).__name__)
            )
        self.store.items.add_spend(self.namespace, failures=1)

    def _rules(self) -> Extractor:
        from ..items.extract import rule_extractor

        return rule_extractor(self.config.items)

    def _record_extract_spend(self) -> None:
        """Add the extractor's model usage since the last record to the namespace's ``item_spend``."""
        take = getattr(self.extractor, "take_usage", None)
        if take is None:
            return  # the offline rules: no model, no spend
        calls, n_in, n_out = take()
        if calls or n_in or n_out:
            self.store.items.add_spend(self.namespace, calls=calls, input_tokens=n_in, output_tokens=n_out)

    def _candidate_texts(self, node: Node) -> list[str]:
        """The texts the node's items will embed (for the group's one embedding call)."""
        return [c.text for c in self._candidates.get(node.id, ())]

    def _store_items(self, node: Node) -> str | None:
        """Store a segment's candidates as cold, auto-extracted items; returns the error, if any (event emitted)."""
        if not self._extracts():
            return None
        if node.id not in self._candidates:  # a node written on its own (retry_failed, summarize_nodes)
            self._extract_group([node])
        cands = self._candidates.pop(node.id, [])
        if not cands:
            return None
        try:
            self._items().extract(cands, session=node.session)
        except Exception as exc:  # noqa: BLE001 - the items store runs the pluggable embedder too; record, never raise
            name = getattr(self.extractor, "name", type(self.extractor).__name__)
            self.events.emit(
                self._event("items.extract_failed", node_id=node.id, extractor=name, error=type(exc).__name__)
            )
            return f"item extraction failed: {type(exc).__name__}: {exc}"
        return None

    def _items(self) -> Any:
        if self._item_api is None:
            from ..items.api import Items

            self._item_api = Items(
                self.store,
                self.namespace,
                tokenizer=self.tokenizer,
                config=self.config.items,
                embedder=self._batched,
                events=self.events,
            )
        return self._item_api
