"""Compact Turn Format (CTF) v1: a lossless, token-lean text encoding of turns.

The format is specified in ``docs/ctf.md``; the rule numbers there are the
section names cited in comments here. This module holds the encoder and the
strict decoder for both kinds of document (``turns`` and ``summaries``).
Lexical rules shared by both directions (escapes, times) come first.

The decoder raises :class:`~stratamem.errors.DecodeError` naming the line for
every malformed input and never returns partial data. Both decoders also read
seed 000's own dialect (``#CTF v1 turns=N fields=…``, :mod:`stratamem.formats.ctf_seed`);
the encoders write only ours.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from itertools import pairwise
from typing import Any

from ..errors import DecodeError, StratamemError, ValidationError
from ..records import Role, Turn, block_from_dict, check_text
from .ctf_seed import is_seed_dialect, read_seed_summaries, read_seed_turns

__all__ = [
    "CTF_VERSION",
    "ROLE_CODES",
    "SummaryRow",
    "decode_summaries",
    "decode_turns",
    "encode_summaries",
    "encode_turns",
]

CTF_VERSION = 1
"""The version this module writes and the only one it reads."""

ROLE_CODES: Mapping[Role, str] = {"system": "s", "user": "u", "assistant": "a", "tool": "t"}
"""One-letter role codes used in rows and in ``name.<r>``/``model.<r>`` keys."""
_ROLE_OF: dict[str, Role] = {code: role for role, code in ROLE_CODES.items()}

_TURN_COLUMNS = ("role", "time", "name", "model", "meta", "content")
_DEFAULT_COLS = ("role", "content")
_SUMMARY_COLS = ("id", "range", "summary", "themes")
_KEY_RE = re.compile(r"^(?:[a-z0-9.]+|x\.[^=\s]*)$")
_HEADER_RE = re.compile(r"^#CTF v(\d{1,9}) ([a-z]+)((?: [^ ]*)*)$")
_TIME_RE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2})(?::(\d{2})(?:\.(\d{1,6}))?)?Z$")
_SECONDS_RE = re.compile(r"^(-?)(\d{1,12})(?:\.(\d{1,6}))?$")
_RANGE_RE = re.compile(r"^(\d{1,18})-(\d{1,18})$")
_NULL = "\\N"
_JSON = "\\J"

# --- lexical rules (docs/ctf.md "Escapes") ---------------------------------------------

_ESCAPES = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
_TEXT_OUT = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})
_HEADER_OUT = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", " ": "\\s"})
_THEME_OUT = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r", "|": "\\|"})


def _unescape(cell: str, line: int, extra: Mapping[str, str] | None = None) -> str:
    if "\\" not in cell:
        return cell
    out: list[str] = []
    i, n = 0, len(cell)
    while i < n:
        ch = cell[i]
        if ch != "\\":
            out.append(ch)
            i += 1
            continue
        nxt = cell[i + 1] if i + 1 < n else ""
        value = _ESCAPES.get(nxt) if nxt else None
        if value is None and extra is not None and nxt:
            value = extra.get(nxt)
        if value is None:
            raise DecodeError(f"bad escape {cell[i : i + 2]!r}", line=line)
        out.append(value)
        i += 2
    return "".join(out)


def _check_raw(line_text: str, line: int) -> None:
    if "\r" in line_text:
        raise DecodeError("raw carriage return (CTF writes CR as \\r; was the document converted to CRLF?)", line=line)


def _cells(row: str, cols: Sequence[str], line: int) -> list[str]:
    """The tab-separated cells of one data row, exactly one per column."""
    _check_raw(row, line)
    cells = row.split("\t")
    if len(cells) != len(cols):
        raise DecodeError(f"expected {len(cols)} cells ({','.join(cols)}), found {len(cells)}", line=line)
    return cells


def _format_time(ts: datetime) -> str:
    ts = ts.astimezone(UTC)
    out = f"{ts.year:04d}-{ts.month:02d}-{ts.day:02d}T{ts.hour:02d}:{ts.minute:02d}"
    if ts.second or ts.microsecond:
        out += f":{ts.second:02d}"
        if ts.microsecond:
            out += "." + f"{ts.microsecond:06d}".rstrip("0")
    return out + "Z"


def _parse_time(value: str, line: int) -> datetime:
    m = _TIME_RE.match(value)
    if not m:
        raise DecodeError(f"t0 is not a UTC time like 2024-01-15T10:00Z: {value!r}", line=line)
    y, mo, d, h, mi, s, frac = m.groups()
    try:
        return datetime(
            int(y),
            int(mo),
            int(d),
            int(h),
            int(mi),
            int(s or 0),
            int((frac or "").ljust(6, "0") or 0),
            tzinfo=UTC,
        )
    except ValueError as exc:
        raise DecodeError(f"t0 is not a valid time: {exc}", line=line) from None


def _format_seconds(us: int) -> str:
    sign = "-" if us < 0 else ""
    whole, frac = divmod(abs(us), 1_000_000)
    return f"{sign}{whole}" + (("." + f"{frac:06d}".rstrip("0")) if frac else "")


def _parse_seconds(value: str, line: int, what: str) -> int:
    """Seconds as exact integer microseconds (no float rounding)."""
    m = _SECONDS_RE.match(value)
    if not m:
        raise DecodeError(f"{what} is not a number of seconds: {value!r}", line=line)
    sign, whole, frac = m.groups()
    us = int(whole) * 1_000_000 + int((frac or "").ljust(6, "0") or 0)
    return -us if sign else us


def _micros(delta: timedelta) -> int:
    return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds


def _compact_json(value: Any) -> str:
    # ensure_ascii=False keeps non-ASCII text as itself (fewer tokens); JSON still
    # escapes every control character, so the result holds no raw TAB, LF or CR.
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


def _load_json(text: str, line: int, what: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise DecodeError(f"{what} is not valid JSON: {exc}", line=line) from None


# --- header (docs/ctf.md "Header") --------------------------------------------------------


def _header(kind: str, items: Iterable[tuple[str, str]]) -> str:
    parts = [f"#CTF v{CTF_VERSION} {kind}"]
    parts.extend(f"{k}={v.translate(_HEADER_OUT)}" for k, v in items)
    return " ".join(parts)


def _parse_header(lines: list[str], kind: str) -> dict[str, str]:
    if not lines or not lines[0]:
        raise DecodeError("missing header: a CTF document starts with '#CTF v1'", line=1)
    first = lines[0]
    _check_raw(first, 1)
    m = _HEADER_RE.match(first)
    if not m:
        raise DecodeError("malformed header: expected '#CTF v<version> <kind> key=value ...'", line=1)
    version, found, rest = m.groups()
    if int(version) != CTF_VERSION:
        raise DecodeError(f"unsupported CTF version {int(version)} (this reader knows v{CTF_VERSION})", line=1)
    if found != kind:
        raise DecodeError(f"expected a {kind!r} document, found {found!r}", line=1)
    keys: dict[str, str] = {}
    for item in rest.split(" ")[1:]:
        key, eq, value = item.partition("=")
        if not eq or not _KEY_RE.match(key):
            raise DecodeError(f"malformed header item {item!r} (expected key=value)", line=1)
        if key in keys:
            raise DecodeError(f"header key {key!r} appears twice", line=1)
        if not key.startswith("x."):  # extensions are ignored by v1 readers
            keys[key] = _unescape(value, 1, {"s": " "})
    return keys


def _split_rows(text: str) -> list[str]:
    if not isinstance(text, str):
        raise DecodeError(f"a CTF document must be a str, got {type(text).__name__}", line=1)
    if text.endswith("\n"):
        text = text[:-1]
    return text.split("\n")


def _count(keys: dict[str, str], rows: int) -> int:
    raw = keys.pop("n", None)
    if raw is None:
        raise DecodeError("header lacks the row count n=", line=1)
    if not raw.isascii() or not raw.isdigit() or len(raw) > 18:
        raise DecodeError(f"n must be a non-negative integer, got {raw!r}", line=1)
    n = int(raw)
    if rows < n:
        raise DecodeError(f"truncated: header says {n} rows, found {rows}", line=rows + 2)
    if rows > n:
        raise DecodeError(f"header says {n} rows but more follow", line=n + 2)
    return n


# --- turns ------------------------------------------------------------------------------


def encode_turns(turns: Iterable[Turn]) -> str:
    """Encode turns as a CTF v1 ``turns`` document.

    Values shared by a whole chunk go into the header once: the first time
    (``t0``), the most common step between turns (``dt``), and a role's name and
    model when every turn of that role has the same one. Columns are written
    only when a value varies.

    Args:
        turns: The turns, in order.

    Returns:
        The document, ending with a newline.

    Raises:
        ValidationError: An item is not a :class:`~stratamem.records.Turn`.
    """
    turns = list(turns)
    for i, t in enumerate(turns):
        if not isinstance(t, Turn):
            raise ValidationError(f"expected a Turn, got {type(t).__name__}", path=f"turns[{i}]")
    items: list[tuple[str, str]] = [("n", str(len(turns)))]
    cols: list[str] = ["role"]
    deltas: list[int] = []
    step = 0
    if turns:
        t0 = turns[0].timestamp
        deltas = [0] + [_micros(b.timestamp - a.timestamp) for a, b in pairwise(turns)]
        if len(deltas) > 1:
            # Most common step; ties go to the earliest seen, so output is deterministic.
            step = Counter(deltas[1:]).most_common(1)[0][0]
        if any(d != step for d in deltas[1:]) or deltas[0] != 0:
            cols.append("time")
        items.append(("t0", _format_time(t0)))
        if step:
            items.append(("dt", _format_seconds(step)))
    defaults: dict[str, dict[Role, str | None]] = {}
    for field in ("name", "model"):
        per_role: dict[Role, set[str | None]] = {}
        for t in turns:
            per_role.setdefault(t.role, set()).add(getattr(t, field))
        if any(len(values) > 1 for values in per_role.values()):
            cols.append(field)
        else:
            defaults[field] = {role: next(iter(v)) for role, v in per_role.items()}
            for role, value in defaults[field].items():
                if value is not None:
                    items.append((f"{field}.{ROLE_CODES[role]}", value))
    if any(t.metadata for t in turns):
        cols.append("meta")
    cols.append("content")
    if tuple(cols) != _DEFAULT_COLS:
        items.insert(1, ("cols", ",".join(cols)))
    lines = [_header("turns", items)]
    for i, t in enumerate(turns):
        row = [ROLE_CODES[t.role]]
        if "time" in cols:
            d = deltas[i]
            row.append("" if d == (step if i else 0) else _format_seconds(d))
        for field in ("name", "model"):
            if field in cols:
                value = getattr(t, field)
                row.append(_NULL if value is None else value.translate(_TEXT_OUT))
        if "meta" in cols:
            row.append(_compact_json(dict(t.metadata)) if t.metadata else "")
        if isinstance(t.content, str):
            row.append(t.content.translate(_TEXT_OUT))
        else:
            row.append(_JSON + _compact_json([b.to_dict() for b in t.content]))
        lines.append("\t".join(row))
    return "\n".join(lines) + "\n"


def _turn_cols(keys: dict[str, str]) -> tuple[str, ...]:
    raw = keys.pop("cols", None)
    if raw is None:
        return _DEFAULT_COLS
    cols = tuple(raw.split(","))
    if len(cols) < 2 or cols[0] != "role" or cols[-1] != "content":
        raise DecodeError(f"cols must start with role and end with content, got {raw!r}", line=1)
    unknown = [c for c in cols if c not in _TURN_COLUMNS]
    if unknown:
        raise DecodeError(f"unknown column {unknown[0]!r}", line=1)
    if len(set(cols)) != len(cols):
        raise DecodeError(f"a column appears twice in {raw!r}", line=1)
    return cols


def _role_defaults(keys: dict[str, str], cols: tuple[str, ...]) -> dict[str, dict[str, str]]:
    defaults: dict[str, dict[str, str]] = {"name": {}, "model": {}}
    for key in list(keys):
        field, dot, code = key.partition(".")
        if field not in defaults or not dot:
            continue
        if code not in _ROLE_OF:
            raise DecodeError(f"unknown role code in header key {key!r}", line=1)
        if field in cols:
            raise DecodeError(f"header key {key!r} conflicts with the {field!r} column", line=1)
        defaults[field][_ROLE_OF[code]] = keys.pop(key)
    return defaults


def decode_turns(text: str) -> list[Turn]:
    """Decode a CTF v1 ``turns`` document.

    Args:
        text: The document, as written by :func:`encode_turns` (or by hand).

    Returns:
        The turns, in order.

    Raises:
        DecodeError: The document is malformed in any way; ``line`` names the
            first bad line. No partial result is returned.
    """
    if is_seed_dialect(text):  # seed 000's own dialect (docs/ctf.md "Seed 000's dialect")
        return read_seed_turns(text)
    lines = _split_rows(text)
    keys = _parse_header(lines, "turns")
    rows = lines[1:]
    n = _count(keys, len(rows))
    cols = _turn_cols(keys)
    defaults = _role_defaults(keys, cols)
    t0 = _parse_time(keys.pop("t0"), 1) if "t0" in keys else None
    step = _parse_seconds(keys.pop("dt"), 1, "dt") if "dt" in keys else 0
    if keys:
        raise DecodeError(f"unknown header key {sorted(keys)[0]!r}", line=1)
    if t0 is None:
        if n:
            raise DecodeError("header lacks the base time t0=", line=1)
        return []
    turns: list[Turn] = []
    at = t0
    for i, row in enumerate(rows):
        line = i + 2
        values = dict(zip(cols, _cells(row, cols, line), strict=True))
        role = _ROLE_OF.get(values["role"])
        if role is None:
            raise DecodeError(f"unknown role code {values['role']!r} (expected s, u, a or t)", line=line)
        raw_time = values.get("time", "")
        delta = _parse_seconds(raw_time, line, "time") if raw_time else (step if i else 0)
        try:
            at = at + timedelta(microseconds=delta)
        except OverflowError:
            raise DecodeError("time is out of range", line=line) from None
        turns.append(_build_turn(role, at, values, defaults, line))
    return turns


def _optional_text(
    values: dict[str, str], field: str, role: str, defaults: dict[str, dict[str, str]], line: int
) -> str | None:
    if field not in values:
        return defaults[field].get(role)
    cell = values[field]
    return None if cell == _NULL else _unescape(cell, line)


def _build_turn(
    role: Role, at: datetime, values: dict[str, str], defaults: dict[str, dict[str, str]], line: int
) -> Turn:
    name = _optional_text(values, "name", role, defaults, line)
    model = _optional_text(values, "model", role, defaults, line)
    meta: Any = {}
    if values.get("meta"):
        meta = _load_json(values["meta"], line, "meta")
        if not isinstance(meta, dict):
            raise DecodeError("meta must be a JSON object", line=line)
    cell = values["content"]
    content: Any
    try:
        if cell.startswith(_JSON):
            raw = _load_json(cell[len(_JSON) :], line, "content blocks")
            if not isinstance(raw, list):
                raise DecodeError("content blocks must be a JSON array", line=line)
            content = tuple(block_from_dict(b, f"content[{k}]") for k, b in enumerate(raw))
        else:
            content = _unescape(cell, line)
        return Turn(
            role=role,
            content=content,
            timestamp=at,
            name=name,
            model=model,
            metadata=meta,
        )
    except DecodeError:
        raise
    except (StratamemError, RecursionError, TypeError) as exc:
        # TypeError: a JSON value of the wrong kind where records expect a string
        # (e.g. an unhashable block "type"); it is bad input, not a bug here.
        raise DecodeError(f"not a valid turn: {exc}", line=line) from None


# --- summaries (docs/ctf.md "Columns of summaries") ---------------------------------------


@dataclass(frozen=True, slots=True)
class SummaryRow:
    """One summary line: a node id, the turn range it covers, its summary and themes.

    Raises:
        ValidationError: On construction, if a field has the wrong type, a text
            is not storable, ``first > last``, or a theme is empty.
    """

    id: str
    """Node id (segment or consolidation)."""
    first: int
    """Id of the first turn covered."""
    last: int
    """Id of the last turn covered."""
    summary: str
    """The summary text."""
    themes: tuple[str, ...] = ()
    """Theme tags; non-empty strings."""

    def __post_init__(self) -> None:
        check_text(self.id, "id")
        check_text(self.summary, "summary")
        for k in ("first", "last"):
            v = getattr(self, k)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ValidationError(f"{k} must be a non-negative integer, got {v!r}", path=k)
        if self.first > self.last:
            raise ValidationError(f"first ({self.first}) is after last ({self.last})", path="first")
        if not isinstance(self.themes, tuple):
            raise ValidationError("themes must be a tuple of strings", path="themes")
        for i, theme in enumerate(self.themes):
            check_text(theme, f"themes[{i}]")
            if not theme:
                raise ValidationError("a theme must not be empty", path=f"themes[{i}]")


def encode_summaries(rows: Iterable[SummaryRow]) -> str:
    """Encode summary rows as a CTF v1 ``summaries`` document.

    Raises:
        ValidationError: An item is not a :class:`SummaryRow`.
    """
    rows = list(rows)
    lines = [_header("summaries", [("n", str(len(rows)))])]
    for i, r in enumerate(rows):
        if not isinstance(r, SummaryRow):
            raise ValidationError(f"expected a SummaryRow, got {type(r).__name__}", path=f"rows[{i}]")
        themes = "|".join(t.translate(_THEME_OUT) for t in r.themes)
        lines.append(
            "\t".join([r.id.translate(_TEXT_OUT), f"{r.first}-{r.last}", r.summary.translate(_TEXT_OUT), themes])
        )
    return "\n".join(lines) + "\n"


def _split_themes(cell: str, line: int) -> tuple[str, ...]:
    if not cell:
        return ()
    # Split on pipes that are not escaped: walk escapes pairwise so '\\|' is a
    # backslash followed by a separator, and '\|' is a literal pipe.
    items: list[str] = []
    start = i = 0
    while i < len(cell):
        if cell[i] == "\\":
            i += 2
            continue
        if cell[i] == "|":
            items.append(cell[start:i])
            start = i + 1
        i += 1
    items.append(cell[start:])
    themes = tuple(_unescape(item, line, {"|": "|"}) for item in items)
    if any(not t for t in themes):
        raise DecodeError("empty theme", line=line)
    return themes


def decode_summaries(text: str) -> list[SummaryRow]:
    """Decode a CTF v1 ``summaries`` document.

    Raises:
        DecodeError: The document is malformed; ``line`` names the first bad line.
    """
    if is_seed_dialect(text):
        try:
            return [SummaryRow(*row) for row in read_seed_summaries(text)]
        except DecodeError:
            raise
        except StratamemError as exc:
            raise DecodeError(f"not a valid summary row: {exc}", line=1) from None
    lines = _split_rows(text)
    keys = _parse_header(lines, "summaries")
    rows = lines[1:]
    _count(keys, len(rows))
    cols = keys.pop("cols", None)
    if cols is not None and tuple(cols.split(",")) != _SUMMARY_COLS:
        raise DecodeError(f"summaries columns are {','.join(_SUMMARY_COLS)}, got {cols!r}", line=1)
    if keys:
        raise DecodeError(f"unknown header key {sorted(keys)[0]!r}", line=1)
    out: list[SummaryRow] = []
    for i, row in enumerate(rows):
        line = i + 2
        node_id, span, summary, themes = _cells(row, _SUMMARY_COLS, line)
        m = _RANGE_RE.match(span)
        if not m:
            raise DecodeError(f"range must be 'first-last', got {span!r}", line=line)
        try:
            out.append(
                SummaryRow(
                    _unescape(node_id, line),
                    int(m.group(1)),
                    int(m.group(2)),
                    _unescape(summary, line),
                    _split_themes(themes, line),
                )
            )
        except DecodeError:
            raise
        except StratamemError as exc:
            raise DecodeError(f"not a valid summary row: {exc}", line=line) from None
    return out
