"""Summary sentences stored as references to the turns they quote (issue 28, ``m027_compact_content``).

An extractive summary is made of sentences copied from the turns its node
covers, each prefixed with its speaker (``"Caroline: I went to a support
group."``); key facts quote the same way. Stored as text, those copies were
the largest part of the pyramid (~70 KB per 1,000 LoCoMo turns). Here a
quoted sentence is stored as ``[turn_id, start, length]``: the text is
``f"{speaker}: {turn.text[start:start + length]}"`` with ``speaker`` the
turn's name or else its role; ``[turn_id, start, length, suffix]`` when the
summarizer ended the quote with one more character (a full stop, an
ellipsis), ``[turn_id, start, length, suffix, prefix]`` when the prefix is
another one. Everything else (generated sentences, action lines) stays
text. The stored form is checked when written: a sentence is a reference
only when reading it back gives exactly the same text.

The references' invariant: a node's summary refers only to turns the node
covers (``node_turns``). A forget clears the summary of every node covering a
forgotten turn, and a purging retention (:func:`inline_turns`) writes the
quoted text back into those summaries before the turns go, so a stored
reference always names a turn that is there.

The JSON form of :class:`~stratamem.records.Summary` (``to_dict``) is
unchanged: :func:`pack` and :func:`unpack` translate between it and the
stored form, and :func:`resolve` fetches the quoted turns for a batch of rows.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import DecodeError
from .sql import Dialect, Writer, chunks
from .text_codec import unpack_text

__all__ = ["inline_turns", "m027_compact_content", "pack", "quoted", "resolve", "stored_summary", "unpack"]

Quote = tuple[str, str]
"""A turn as summaries quote it: ``(speaker, text)``."""


def _is_ref(entry: Any) -> bool:
    return isinstance(entry, list) and len(entry) >= 3 and all(isinstance(x, int) for x in entry[:3])


def _text(entry: list[Any], turns: Mapping[int, Quote]) -> str:
    tid, start, length = int(entry[0]), int(entry[1]), int(entry[2])
    if tid not in turns:
        raise DecodeError(f"a stored summary quotes turn {tid}, which is not in the store")
    speaker, text = turns[tid]
    suffix = str(entry[3]) if len(entry) > 3 else ""
    prefix = str(entry[4]) if len(entry) > 4 else f"{speaker}: "
    return prefix + text[start : start + length] + suffix


def _ref(text: str, tid: Any, turns: Mapping[int, Quote]) -> list[Any] | None:
    """``text`` as a reference into turn ``tid``, or ``None`` when it does not quote that turn exactly."""
    if not isinstance(tid, int) or isinstance(tid, bool) or tid not in turns or not isinstance(text, str):
        return None
    speaker, body = turns[tid]
    default = f"{speaker}: "
    prefix, quote = (default, text[len(default) :]) if text.startswith(default) else ("", text)
    for suffix in ("", quote[-1:]):  # as quoted, or with one character the summarizer added at the end
        part = quote[: len(quote) - len(suffix)]
        start = body.find(part) if part else -1
        if start < 0:
            continue
        entry: list[Any] = [tid, start, len(part)]
        if suffix or prefix != default:
            entry.append(suffix)
        if prefix != default:
            entry.append(prefix)
        return entry if _text(entry, turns) == text else None
    return None


def quoted(d: Mapping[str, Any]) -> set[int]:
    """Turn ids a summary's JSON form (stored or not) names as sources of its sentences and key facts."""
    out: set[int] = set()
    for entry in (*d.get("sentences", ()), *d.get("key_facts", ())):
        if _is_ref(entry):
            out.add(int(entry[0]))
        elif isinstance(entry, list) and len(entry) >= 2 and isinstance(entry[1], int):
            out.add(int(entry[1]))
    return out


def pack(d: Mapping[str, Any], turns: Mapping[int, Quote]) -> dict[str, Any]:
    """The stored form of a summary's JSON form: sentences and key facts that quote ``turns`` as references.

    Args:
        d: :meth:`Summary.to_dict` output (entries already references are kept).
        turns: The quotable turns (those the node covers), ``id -> (speaker, text)``.
    """
    out = {k: v for k, v in d.items() if not (k == "executive" and v is None)}  # from_dict's default
    sentences = []
    for s in d.get("sentences", ()):
        ref = _ref(s[0], s[1], turns) if not _is_ref(s) and len(s) == 2 else None
        sentences.append(ref if ref is not None else s)
    facts = []
    for f in d.get("key_facts", ()):
        ref = _ref(f[0], f[1], turns) if isinstance(f, list) and not _is_ref(f) and len(f) == 2 else None
        facts.append(ref if ref is not None else f)
    if "sentences" in d:
        out["sentences"] = sentences
    if "key_facts" in d:
        out["key_facts"] = facts
    return out


def unpack(d: Mapping[str, Any], turns: Mapping[int, Quote]) -> dict[str, Any]:
    """Inverse of :func:`pack`: every reference back to ``[text, turn_id]``.

    Raises:
        DecodeError: A reference names a turn missing from ``turns``.
    """
    out = dict(d)
    if "sentences" in d:
        out["sentences"] = [[_text(s, turns), int(s[0])] if _is_ref(s) else s for s in d["sentences"]]
    if "key_facts" in d:
        out["key_facts"] = [[_text(f, turns), int(f[0])] if _is_ref(f) else f for f in d["key_facts"]]
    return out


def _refs(d: Mapping[str, Any]) -> set[int]:
    return {int(e[0]) for e in (*d.get("sentences", ()), *d.get("key_facts", ())) if _is_ref(e)}


def _quotes(
    run: Any, d: Dialect, key: Any, ids: Iterable[int], node: tuple[Any, int] | None = None
) -> dict[int, Quote]:
    """``id -> (speaker, text)`` of the namespace's turns among ``ids`` (with ``node``, only those it covers).

    ``run(statement, params)`` returns rows; ``node`` is ``(tenant_of_node_turns or None, node_id)``.
    """
    out: dict[int, Quote] = {}
    wanted = sorted({int(i) for i in ids})
    for part in chunks(wanted):
        where = f"t.{d.tenant} = ? AND {d.in_list('t.id', len(part))}"
        params: list[Any] = [key, *part]
        if node is not None:
            tenant, node_id = node
            same = f" AND nt.{d.tenant} = t.{d.tenant}" if tenant else ""
            where += f" AND t.id IN (SELECT nt.turn_id FROM node_turns nt WHERE nt.node_id = ?{same})"
            params.append(int(node_id))
        for tid, name, role, text in run(f"SELECT t.id, t.name, t.role, t.text FROM turns t WHERE {where}", params):
            out[int(tid)] = (name or role, unpack_text(text))
    return out


def stored_summary(run: Any, d: Dialect, key: Any, node_id: int, tenant: bool, summary: Mapping[str, Any]) -> str:
    """The JSON text to store for a node's summary: its quotes of turns the node covers as references.

    Args:
        run: ``run(statement, params) -> rows`` inside the writing transaction.
        d: The dialect.
        key: The namespace's tenant key.
        node_id: The node whose summary it is.
        tenant: Whether ``node_turns`` carries the tenant column (PostgreSQL).
        summary: :meth:`Summary.to_dict` output.
    """
    ids = quoted(summary)
    turns = _quotes(run, d, key, ids, (tenant, node_id)) if ids else {}
    return json.dumps(pack(summary, turns), ensure_ascii=False, separators=(",", ":"))


def resolve(run: Any, d: Dialect, key: Any, stored: Sequence[str | None]) -> list[dict[str, Any] | None]:
    """Stored summary texts (``None`` for none) as :meth:`Summary.to_dict` forms, quoted turns read in one pass.

    Raises:
        DecodeError: A reference names a turn the store no longer holds.
    """
    parsed = [json.loads(s) if s else None for s in stored]
    ids = set().union(*(_refs(p) for p in parsed if p is not None)) if parsed else set()
    if not ids:
        return parsed
    turns = _quotes(run, d, key, ids)
    return [unpack(p, turns) if p is not None else None for p in parsed]


def inline_turns(w: Writer, d: Dialect, key: Any, tenant: bool, turn_ids: Sequence[int]) -> int:
    """Write the quoted text back into every summary of the namespace that quotes one of ``turn_ids``.

    Run before those turns are deleted (a purging retention), in the same
    transaction ``w``. Returns how many summaries were rewritten.
    """

    def run(statement: str, params: Sequence[Any]) -> list[Any]:
        return list(w.execute(statement, params).fetchall())

    gone = {int(t) for t in turn_ids}
    if not gone:
        return 0
    nodes: set[int] = set()
    same = f" AND {d.tenant} = ?" if tenant else ""
    for part in chunks(sorted(gone)):
        rows = run(
            f"SELECT DISTINCT node_id FROM node_turns WHERE {d.in_list('turn_id', len(part))}{same}",
            [*part, *((key,) if tenant else ())],
        )
        nodes.update(int(r[0]) for r in rows)
    rewritten = 0
    for part in chunks(sorted(nodes)):
        rows = run(
            f"SELECT id, summary FROM nodes WHERE {d.tenant} = ? AND {d.in_list('id', len(part))} "
            "AND summary IS NOT NULL",
            [key, *part],
        )
        for node_id, text in rows:
            stored = json.loads(text)
            if not _refs(stored) & gone:
                continue
            full = unpack(stored, _quotes(run, d, key, _refs(stored)))
            keep = _quotes(run, d, key, _refs(stored) - gone)
            body = json.dumps(pack(full, keep), ensure_ascii=False, separators=(",", ":"))
            w.execute(f"UPDATE nodes SET summary = ? WHERE {d.tenant} = ? AND id = ?", (body, key, int(node_id)))
            rewritten += 1
    return rewritten


_BATCH = 500


def m027_compact_content(conn: Any) -> None:
    """Issue 28's content pass (both backends, no model needed, idempotent): SQLite turn texts
    packed (:func:`~stratamem.store.text_codec.m027_turn_texts`), every stored summary quoting
    its turns by reference (:func:`pack`). Nothing is lost: a text is packed and a sentence
    becomes a reference only when it reads back the same. On SQLite the file is then vacuumed
    when enough of it is free.
    """
    from .text_codec import m027_turn_texts

    m027_turn_texts(conn)
    _summary_refs(conn)


def _summary_refs(conn: Any) -> None:
    """Every stored summary re-stored through :func:`stored_summary`, in batches in key order."""
    from .sql import SQLITE, dialect_of

    d = dialect_of(conn)
    w = Writer(conn, d)
    t = d.tenant
    tenant = d is not SQLITE  # node_turns carries the tenant on PostgreSQL

    def run(statement: str, params: Sequence[Any]) -> list[Any]:
        return list(w.execute(statement, params).fetchall())

    last: tuple[Any, ...] = ()
    while True:
        after = f"AND ({t}, id) > (?, ?)" if last else ""
        rows = run(
            f"SELECT {t}, id, summary FROM nodes WHERE summary IS NOT NULL {after} ORDER BY {t}, id LIMIT {_BATCH}",
            last,
        )
        if not rows:
            break
        last = tuple(rows[-1][:2])
        for key, node_id, text in rows:
            body = stored_summary(run, d, key, int(node_id), tenant, json.loads(text))
            if body != text:
                w.execute(f"UPDATE nodes SET summary = ? WHERE {t} = ? AND id = ?", (body, key, int(node_id)))
