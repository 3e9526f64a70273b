"""``Idempotency-Key`` on the HTTP writes other than ``POST /turns`` (which the library keeps atomic).

``POST /turns`` passes the key to ``Memory.add``, which claims it in the
transaction that stores the turns (:mod:`stratamem.memory.once`). The other
writes (items, reviews, supersede, seal, import, working state) go through
:func:`run_once`: the key is claimed in the store before the write, and what
the write produced is recorded after it, as a small reference (an item id, a
node id, counts; never stored content) from which the answer is rebuilt on a
retry. A write that fails releases its key, so a retry runs it again. Between
the write's commit and the record there is a window: a server killed in it
leaves the key claimed without an answer, and a retry gets 409 rather than a
second write.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from ..errors import ConflictError
from ..memory.once import check_key

__all__ = ["run_once"]

_T = TypeVar("_T")


def _known(store: Any, namespace: str, key: str, digest: str) -> Any:
    """The recorded reference of ``key``, ``None`` when unknown.

    Raises:
        ConflictError: The key belongs to another request, or its write has not recorded an answer.
    """
    found = store.idempotency.get(namespace, key)
    if found is None:
        return None
    if found.digest != digest:
        raise ConflictError(f"idempotency key {key!r} was already used for a different request", path="idempotency_key")
    if found.result is None:
        raise ConflictError(
            f"the request with idempotency key {key!r} is under way, or the server stopped before recording its "
            "answer; check what is stored before sending it again with a new key"
        )
    return found.result


def run_once(
    memory: Any,
    key: str | None,
    digest: str,
    write: Callable[[], _T],
    reference: Callable[[_T], Any],
    rebuild: Callable[[Any], _T],
) -> _T:
    """Run ``write`` once per ``key``; a retry with the same ``digest`` gets ``rebuild(reference(first answer))``.

    Args:
        memory: The namespace's memory (its store keeps the keys).
        key: The ``Idempotency-Key`` header, or ``None`` (then ``write`` just runs).
        digest: The request's digest (:func:`stratamem.memory.once.request_digest`).
        write: The library call.
        reference: What to record of its answer (JSON).
        rebuild: The answer again, from the recorded reference.

    Raises:
        ValidationError: A malformed key.
        ConflictError: The key was used for another request, or its first write recorded no answer.
    """
    if key is None:
        return write()
    key = check_key(key)
    store, namespace = memory.store, memory.namespace
    done = _known(store, namespace, key, digest)
    if done is not None:
        return rebuild(done)
    with store.transaction():
        claimed = store.idempotency.claim(namespace, key, digest)
    if not claimed:  # a concurrent request with the key won
        return rebuild(_known(store, namespace, key, digest))
    try:
        out = write()
    except BaseException:
        store.idempotency.release(namespace, key)
        raise
    store.idempotency.finish(namespace, key, reference(out))
    return out
