"""Writes a retry does not repeat: ``Memory.add(..., idempotency_key=...)``.

A client that loses its connection before the answer cannot tell whether its
write was stored; with an idempotency key it sends the same call again. The
first call claims the key in the transaction that stores its turns
(:mod:`stratamem.store.idempotency`), with a digest of its arguments; a later
call with the key and the same arguments stores nothing and returns the turns
the first one stored (those still stored: a forgotten turn is not brought
back), and one with other arguments is a :class:`~stratamem.errors.ConflictError`.
Keys are per namespace and live 24 hours (:data:`~stratamem.store.idempotency.RETENTION`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from ..errors import ConflictError, ValidationError
from ..records import StoredTurn
from ..store import Store, TurnBatch

__all__ = ["MAX_KEY_CHARS", "Once", "check_key", "request_digest"]

MAX_KEY_CHARS = 255
"""Longest idempotency key (a UUID is 36 characters)."""


def check_key(key: object) -> str:
    """Validate an idempotency key: 1 to :data:`MAX_KEY_CHARS` printable characters.

    Raises:
        ValidationError: Anything else.
    """
    if not isinstance(key, str) or not 0 < len(key) <= MAX_KEY_CHARS or not key.isprintable():
        raise ValidationError(
            f"an idempotency key must be 1 to {MAX_KEY_CHARS} printable characters", path="idempotency_key"
        )
    return key


def _plain(value: Any) -> Any:
    if hasattr(value, "to_dict"):
        return value.to_dict()
    if isinstance(value, datetime):
        return value.isoformat()
    return repr(value)


def request_digest(kind: str, *parts: Any) -> str:
    """SHA-256 of a request's canonical JSON: the same arguments give the same digest in any process."""
    text = json.dumps([kind, *parts], sort_keys=True, separators=(",", ":"), default=_plain, ensure_ascii=False)
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class Once:
    """One write under an idempotency key; with ``key=None`` it is a plain write.

    Args:
        store: The store.
        namespace: The namespace written.
        key: The idempotency key, or ``None``.
        digest: :func:`request_digest` of the call's arguments.

    Raises:
        ValidationError: A malformed key.
    """

    def __init__(self, store: Store, namespace: str, key: str | None, digest: str) -> None:
        self.store, self.namespace, self.digest = store, namespace, digest
        self.key = None if key is None else check_key(key)

    def replay(self) -> list[StoredTurn] | None:
        """The turns the key's first call stored, or ``None`` when the key is new (or there is none).

        Raises:
            ConflictError: The key was used with other arguments, or its write is still under way.
        """
        if self.key is None:
            return None
        found = self.store.idempotency.get(self.namespace, self.key)
        if found is None:
            return None
        if found.digest != self.digest:
            raise ConflictError(
                f"idempotency key {self.key!r} was already used for a different request", path="idempotency_key"
            )
        if found.result is None:
            raise ConflictError(f"the request with idempotency key {self.key!r} is still under way; retry later")
        ids = found.result.get("turns", [])
        return self.store.turns(self.namespace, ids=ids) if ids else []

    def append(self, batches: Sequence[TurnBatch]) -> tuple[list[StoredTurn], bool]:
        """Store ``batches`` and claim the key in one transaction; ``(turns, fresh)``.

        ``fresh`` is ``False`` when a concurrent call with the same key won the
        claim: its turns are returned and nothing is stored.
        """
        if self.key is None:
            return self.store.append(self.namespace, batches), True
        with self.store.transaction():
            if not self.store.idempotency.claim(self.namespace, self.key, self.digest):
                return self.replay() or [], False
            stored = self.store.append(self.namespace, batches)
            self.store.idempotency.finish(self.namespace, self.key, {"turns": [t.id for t in stored]})
        return stored, True
