"""How the PostgreSQL mirrors encode what they search: pgvector values and full-text terms.

* **Vectors** are pgvector ``vector`` values (the codec, :func:`vector_literal` and
  :func:`vector_from_binary`, lives in :mod:`stratamem.store.vectors`, which the
  shared node and item code uses; it is re-exported here). They are written as text
  literals (every float32 printed as the exact double it widens to, which
  pgvector's ``strtof`` reads back bit for bit) and read in pgvector's binary
  form (``vector_send``: big-endian float32, as ``bytea``, so whatever type
  loaders a caller registered on a pooled connection do not matter), so a vector round-trips exactly and the callers
  keep dealing in little-endian float32 bytes, as with SQLite's blobs.
* **Full-text terms.** SQLite indexes item text with FTS5's ``unicode61``
  tokenizer (case- and diacritic-folded words). PostgreSQL's own parser splits
  text differently (e-mail addresses, URLs and hyphenated words are single
  tokens; non-ASCII classification depends on the server's locale), so the
  words are cut here, in Python, by one rule for index and query alike, and
  stored with ``array_to_tsvector`` under a GIN index. Only the FTS5 subset
  :func:`stratamem.items.search.fts_query` produces is translated (quoted or
  bare terms joined by ``OR``/``AND``); anything else is refused.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata

import psycopg

from ...errors import MigrationError, ValidationError
from ..vectors import vector_from_binary, vector_literal

__all__ = ["fts_to_tsquery", "index_terms", "require_pgvector", "vector_from_binary", "vector_literal", "words"]

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
# A tsvector lexeme holds at most 2,046 bytes; longer words are replaced by a
# digest on both sides, so they still match exactly instead of failing the insert.
_MAX_WORD_BYTES = 200
_TOKEN = re.compile(r'\s*(?:"((?:[^"]|"")*)"|([^\s"]+))')


def _fold(word: str) -> str:
    if len(word.encode()) <= _MAX_WORD_BYTES:
        return word
    return "h" + hashlib.blake2b(word.encode(), digest_size=16).hexdigest()


def words(text: str) -> list[str]:
    """Lower-cased, diacritic-free words of ``text`` in order (FTS5 ``unicode61 remove_diacritics 2``-like)."""
    decomposed = unicodedata.normalize("NFKD", text.lower())
    plain = "".join(c for c in decomposed if not unicodedata.combining(c))
    return [_fold(w) for w in _WORD.findall(plain)]


def index_terms(text: str) -> list[str]:
    """The distinct words stored in an item's ``tsvector``."""
    return list(dict.fromkeys(words(text)))


def fts_to_tsquery(match: str) -> str:
    """Translate an FTS5 expression of quoted or bare terms joined by OR/AND into ``tsquery`` text.

    A quoted multi-word phrase becomes the AND of its words (the stored
    vectors keep no positions). Returns ``""`` when no term has a word.

    Raises:
        ValidationError: The expression uses FTS5 syntax beyond that subset
            (NOT, NEAR, parentheses, column filters, prefixes, boosts).
    """
    parts: list[str] = []
    pending_op = ""
    pos = 0
    match = match.strip()
    while pos < len(match):
        m = _TOKEN.match(match, pos)
        if m is None or m.end() == pos:
            raise ValidationError(f"cannot parse full-text query {match!r}", path="match")
        pos = m.end()
        quoted, bare = m.group(1), m.group(2)
        if bare in ("OR", "AND"):
            pending_op = "|" if bare == "OR" else "&"
            continue
        if bare is not None and (bare in ("NOT", "NEAR") or not _WORD.fullmatch(bare)):
            raise ValidationError(f"full-text syntax {bare!r} is not supported on PostgreSQL", path="match")
        text = quoted.replace('""', '"') if quoted is not None else bare
        terms = words(text)
        if not terms:
            pending_op = ""
            continue
        phrase = " & ".join(f"'{t}'" for t in terms)
        if parts:
            parts.append(pending_op or "&")  # FTS5: adjacent terms are an implicit AND
        parts.append(f"({phrase})" if len(terms) > 1 else phrase)
        pending_op = ""
    return " ".join(parts)


def require_pgvector(conn: psycopg.Connection) -> None:
    """Make sure the ``vector`` type is usable on this connection, creating the extension if allowed.

    Called by the migrations that store vectors, inside their transaction.
    The extension is created in ``public`` (on every store's ``search_path``),
    never in a store's own schema, where other stores could not see it.

    Raises:
        MigrationError: pgvector is missing and this role may not create it, or
            it lives in a schema that is not on the ``search_path``.
    """
    if conn.execute("SELECT to_regtype('vector')").fetchone()[0] is not None:  # type: ignore[index]
        return
    where = conn.execute(
        "SELECT n.nspname FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
    ).fetchone()
    if where is not None:
        raise MigrationError(
            f"pgvector is installed in schema {where[0]!r}, which is not on this connection's "
            "search_path; add it (ALTER ROLE ... SET search_path) and open the store again"
        )
    try:
        with conn.transaction():
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    except psycopg.Error as exc:
        raise MigrationError(
            "stratamem needs the pgvector extension (>= 0.5) and this role cannot create it: have a superuser run "
            f"'CREATE EXTENSION vector WITH SCHEMA public' in this database once ({exc})"
        ) from exc
    if conn.execute("SELECT to_regtype('vector')").fetchone()[0] is None:  # type: ignore[index]
        raise MigrationError("pgvector was created in schema public, which is not on this connection's search_path")
