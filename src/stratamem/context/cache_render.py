"""Rendering the cache layout for a provider: the stable prefix first, breakpoints on it, the rest last.

:func:`finish_cached` is the cache layout's last step (:mod:`stratamem.context.layout`),
in place of :func:`~stratamem.context.finish.finish`:

* ``openai`` / ``responses``: one leading ``system`` message holding L0-L2
  (it changes only when they do), the window's messages (L3) up to the
  newest one, then L4 as a ``system`` message after them, so that the whole
  conversation, the newest message included, is already what the next
  call's window holds (L4 before the newest message made that message new to
  the next call: 3 points of prefix share on LoCoMo);
* ``anthropic``: ``system`` as text blocks (L0-L1, then the ledger L2), the
  window's messages, and L4 as the last text block of the last user message
  (after its words or tool results). ``cache_control`` marks the
  stable prefix: after L1, after the ledger, on the last block of the
  window before that message (a *rolling* breakpoint: the next call finds
  this call's entry a few blocks behind its own), and, on a long window, at
  a message on a fixed grid, so the provider's 20-block lookback always
  reaches an entry. A breakpoint whose prefix is shorter than the model's
  minimum cacheable length is left out, and the manifest says so;
* ``text``: the sections, the window's lines, then L4.

The manifest's ``cache`` records the stable prefix's tokens (per layer) and a
hash of its bytes, the breakpoints as sent and the window's anchor. If a count
was low, the guard trims L4 first, then the window's oldest turns, then the
stable sections.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..records import StoredTurn
from ..records.manifests import Context, ContextItem, Manifest, NearMiss
from ..tokens import MESSAGE_TOKENS, Tokenizer, count_message, count_messages
from .assembly import Assembly
from .cache_inputs import CacheInputs
from .finish import _resolve_duplicates
from .history import History
from .render import STEP_STUB, render, snap_step_window, stub_tokens
from .window import Window

if TYPE_CHECKING:
    from .layout import Anchored

__all__ = [
    "GRID_MESSAGES",
    "LEAD",
    "LOOKBACK_BLOCKS",
    "RECALL_TITLE",
    "STEP_STUB",
    "Layers",
    "finish_cached",
    "stable_hash",
    "stub_tokens",
]

LEAD = -1
"""Key of ``stays`` whose block opens the window: the current request's kept recall once the
request's words have left the window (it then rides at the window's start until the next jump)."""

RECALL_TITLE = "## Recalled for this message"
"""The title the per-call layer opens with (it follows the conversation)."""


LOOKBACK_BLOCKS = 18
"""Blocks of window after which an intermediate breakpoint is added (Anthropic looks back 20 blocks
from a breakpoint for an earlier entry; two are kept spare)."""
GRID_MESSAGES = 12
"""The intermediate breakpoint sits on every twelfth window message, so calls share its position."""
_UNMARKABLE = {"thinking", "redacted_thinking"}


@dataclass
class Layers:
    """Which placed section belongs to which stable layer, and where the per-call sections begin."""

    of: dict[int, str] = field(default_factory=dict)
    """Section index → ``instructions``, ``state`` or ``ledger``."""
    per_call_from: int = 0
    """Index of the first per-call (L4) section."""
    recall_title: bool = False
    """L4 opens with its title (the layout reserved its cost)."""

    def add(self, layer: str, index: int) -> None:
        """Record that section ``index`` belongs to ``layer``."""
        self.of[index] = layer


@dataclass
class _Out:
    """One rendering: what is sent, and the accounting of its stable prefix."""

    messages: tuple[dict[str, Any], ...]
    system: str | None
    system_blocks: tuple[dict[str, Any], ...] | None
    text: str
    total: int
    stable: int
    stable_part: Any
    breakpoints: list[dict[str, Any]]
    notes: list[str]


def _canon(value: Any) -> Any:
    """A value without ``cache_control``, a string content as one text block (as providers read it)."""
    if isinstance(value, Mapping):
        out = {k: _canon(v) for k, v in value.items() if k != "cache_control"}
        if isinstance(out.get("content"), str) and out.get("role") in ("user", "assistant"):
            out["content"] = [{"type": "text", "text": out["content"]}]
        return out
    if isinstance(value, list | tuple):
        return [_canon(v) for v in value]
    return value


def stable_hash(part: Any) -> str:
    """``sha256:`` of a stable part's canonical JSON (``cache_control`` and string/block spelling aside)."""
    body = json.dumps(_canon(part), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(body.encode("utf-8")).hexdigest()


def _mark(message: Mapping[str, Any], cc: Mapping[str, Any], index: int = -1) -> dict[str, Any] | None:
    """``message`` with ``cache_control`` on block ``index`` (a string content becomes one text block)."""
    content = message.get("content")
    blocks: list[dict[str, Any]] = (
        [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content or ()]
    )
    if not blocks or blocks[index].get("type") in _UNMARKABLE:
        return None
    blocks[index] = {**blocks[index], "cache_control": dict(cc)}
    return {**message, "content": blocks}


def _with_l4(messages: list[dict[str, Any]], l4: str) -> int:
    """Put L4 last in the last user message (appending one if there is none); the message's index.

    Last, after the user's words and tool results: everything before it is the next call's window
    as sent, so the next call re-sends none of this message (before the words, the message's
    text would be new to the next call's prefix).
    """
    block = {"type": "text", "text": l4}
    if messages and messages[-1].get("role") == "user":
        content = messages[-1]["content"]
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else [dict(b) for b in content]
        messages[-1] = {**messages[-1], "content": [*blocks, block]}
        return len(messages) - 1
    messages.append({"role": "user", "content": [block]})
    return len(messages) - 1


def _window_messages(window: Sequence[StoredTurn], fmt: str, stays: Mapping[int, str]) -> list[dict[str, Any]]:
    """The window's messages, each kept recall block right after its request's words.

    The window is rendered in runs that end at a request turn with a block, so each block sits
    where the request's first call sent it as L4: the last text block of the request's user
    message (Anthropic), a ``system`` message after it (OpenAI). A run after a block opens with
    the assistant's tool call (:func:`~stratamem.context.layout.kept_blocks`), so no message is
    merged across a run's end. ``stays[LEAD]`` opens the window (the current request's block once
    the request's words are out of it).
    """
    out: list[dict[str, Any]] = []
    run: list[Any] = []
    for st in window:
        run.append(st.turn)
        text = stays.get(st.id)
        if not text:
            continue
        out.extend(dict(m) for m in render(run, fmt)[0])
        run = []
        if fmt == "anthropic":
            _with_l4(out, text)
        else:
            out.append({"role": "system", "content": text})
    out.extend(dict(m) for m in render(run, fmt)[0])
    lead = stays.get(LEAD)
    if lead and fmt == "anthropic":
        # The first text block of the user message the window opens with: the request's words of
        # a window that starts at a request, else the user message a window opening on a tool step
        # needs, in place of the stub.
        if out and out[0].get("role") == "user":
            content = out[0]["content"]
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else list(content)
            out[0] = {**out[0], "content": [{"type": "text", "text": lead}, *blocks]}
        else:
            out.insert(0, {"role": "user", "content": [{"type": "text", "text": lead}]})
    elif lead:
        out.insert(0, {"role": "system", "content": lead})
    return out


def _anthropic(
    groups: Sequence[tuple[str, str]],
    window: list[StoredTurn],
    l4: str,
    tokenizer: Tokenizer,
    inputs: CacheInputs,
    stays: Mapping[int, str],
) -> _Out:
    head = "\n\n".join(t for layer, t in groups if layer != "ledger")
    ledger = "\n\n".join(t for layer, t in groups if layer == "ledger")
    long = {"type": "ephemeral", **({"ttl": "1h"} if inputs.ttl == "1h" else {})}
    rolling = {"type": "ephemeral"}
    head_name = "state" if any(layer == "state" for layer, _ in groups) else "instructions"
    named = [(n, t) for n, t in ((head_name, head), ("ledger", ledger)) if t]
    blocks: list[dict[str, Any]] = [{"type": "text", "text": t} for _, t in named]
    msgs = _window_messages(window, "anthropic", stays)
    if msgs and msgs[0].get("role") != "user":
        msgs.insert(0, {"role": "user", "content": STEP_STUB})  # a window that opens on a tool step
    holder = _with_l4(msgs, l4) if l4 else None
    stable_msgs = msgs if holder is None else msgs[:holder]
    system = "\n\n".join(b["text"] for b in blocks)
    # Prefix tokens at the end of each system block, then of each message.
    sys_ends, running = [], MESSAGE_TOKENS if blocks else 0
    for b in blocks:
        running += tokenizer.count(b["text"])
        sys_ends.append(running)
    msg_ends = []
    for m in msgs:
        running += count_message(m, tokenizer)
        msg_ends.append(running)
    notes: list[str] = []
    bps: list[dict[str, Any]] = []

    def allowed(after: str, counted: int) -> bool:
        tokens = inputs.provider_tokens(counted)
        if tokens < inputs.min_tokens:
            notes.append(
                f"cache: no breakpoint after {after}: its prefix is {tokens} tokens, "
                f"below the model's minimum of {inputs.min_tokens}"
            )
            return False
        return True

    for i, (name, _) in enumerate(named):
        if allowed(name, sys_ends[i]):
            blocks[i] = {**blocks[i], "cache_control": dict(long)}
            bps.append({"after": name, "tokens": inputs.provider_tokens(sys_ends[i]), "ttl": inputs.ttl})
    # The rolling breakpoint: the window's last block before L4 (inside L4's message when L4 comes last there).
    if holder is None:
        last, index = len(msgs) - 1, -1
    elif len(msgs[holder]["content"]) > 1:
        last, index = holder, -2
    else:
        last, index = holder - 1, -1
    marks: list[tuple[int, int, str]] = []
    if last >= 0:
        marks.append((last, index, "the window"))
        blocks_before = sum(
            1 if isinstance(m.get("content"), str) else len(m.get("content") or ()) for m in msgs[: last + 1]
        )
        grid = (last // GRID_MESSAGES) * GRID_MESSAGES - 1
        if blocks_before > LOOKBACK_BLOCKS and 0 <= grid < last:
            marks.insert(0, (grid, -1, "the window's grid"))
    for j, index, name in marks:
        counted = msg_ends[j] - (tokenizer.count(l4) if index == -2 else 0)
        if not allowed(f"{name} (message {j})", counted):
            continue
        marked = _mark(msgs[j], rolling, index)
        if marked is None:
            continue
        msgs[j] = marked
        bps.append({"after": f"message {j}", "tokens": inputs.provider_tokens(counted), "ttl": "5m"})
    total = count_messages(msgs, tokenizer, system=system or None)
    stable = msg_ends[len(stable_msgs) - 1] if stable_msgs else (sys_ends[-1] if sys_ends else 0)
    if holder is not None and len(msgs[holder]["content"]) > 1:
        # L4 follows the newest message's words or tool results: those are already the next call's window.
        lead = {**msgs[holder], "content": list(msgs[holder]["content"][:-1])}
        stable_msgs = [*stable_msgs, lead]
        stable = msg_ends[holder] - tokenizer.count(l4)
    part = {"system": [b["text"] for b in blocks], "messages": stable_msgs}
    return _Out(tuple(msgs), system, tuple(blocks), "", total, stable, part, bps, notes)


def _openai(
    groups: Sequence[tuple[str, str]],
    window: list[StoredTurn],
    l4: str,
    tokenizer: Tokenizer,
    stays: Mapping[int, str],
) -> _Out:
    head = "\n\n".join(t for _, t in groups)
    msgs = _window_messages(window, "openai", stays)
    out = ([{"role": "system", "content": head}] if head else []) + msgs
    cut = len(out)
    if l4:
        # Last, after the newest message: everything before it is the next call's window as sent.
        out.append({"role": "system", "content": l4})
    stable_msgs = out[:cut]
    stable = sum(count_message(m, tokenizer) for m in stable_msgs)
    total = count_messages(out, tokenizer)
    return _Out(tuple(out), None, None, "", total, stable, {"messages": stable_msgs}, [], [])


def _text(groups: Sequence[tuple[str, str]], window: list[StoredTurn], l4: str, tokenizer: Tokenizer) -> _Out:
    _, _, lines = render([st.turn for st in window], "text")
    stable_text = "\n\n".join(p for p in [*(t for _, t in groups), lines] if p)
    full = "\n\n".join(p for p in (stable_text, l4) if p)
    total = tokenizer.count(full)
    return _Out((), None, None, full, total, tokenizer.count(stable_text), {"text": stable_text}, [], [])


def _render(
    asm: Assembly,
    layers: Layers,
    sections: list[str],
    window: list[StoredTurn],
    inputs: CacheInputs,
    stays: Mapping[int, str],
) -> tuple[_Out, str]:
    stable = [(layers.of.get(i, "state"), s) for i, s in enumerate(sections[: layers.per_call_from])]
    per_call = sections[layers.per_call_from :]
    l4 = "\n\n".join(per_call)
    if l4 and layers.recall_title:
        l4 = f"{RECALL_TITLE}\n\n{l4}"
    if asm.fmt == "anthropic":
        out = _anthropic(stable, window, l4, asm.tokenizer, inputs, stays)
    elif asm.fmt == "openai":
        out = _openai(stable, window, l4, asm.tokenizer, stays)
    else:
        out = _text(stable, window, l4, asm.tokenizer)
    return out, l4


def finish_cached(
    asm: Assembly,
    layers: Layers,
    window: Window,
    history: History,
    policy: str,
    notes: Sequence[str],
    inputs: CacheInputs,
    deviation: str | None,
    anchored: Anchored | None,
    *,
    stays: Mapping[int, str] | None = None,
    keeps: int | None = None,
) -> Context:
    """Render the layers for ``asm.fmt``, guard the budget, and write the manifest with its ``cache`` account.

    ``stays``: kept recall blocks shown after their request turns in the window; ``keeps``: the
    request turn whose first call this is (its L4 is recorded as that request's kept block).
    """
    stays = stays or {}
    turns = list(window.turns)
    sections = list(asm.sections)
    section_ids = list(asm.section_ids)
    out, l4 = _render(asm, layers, sections, turns, inputs, stays)
    while out.total > asm.budget and (sections or turns):
        if len(sections) > layers.per_call_from:
            sections.pop()
            section_ids.pop()
        elif turns:
            turns = snap_step_window(turns[1:])
        else:
            sections.pop()
            section_ids.pop()
            layers.per_call_from = min(layers.per_call_from, len(sections))
        out, l4 = _render(asm, layers, sections, turns, inputs, stays)
    shown = set().union(*section_ids) if section_ids else set()
    stable_ids = set().union(*section_ids[: layers.per_call_from]) if section_ids else set()
    shown |= {f"turn:{st.id}" for st in turns}
    misses = list(asm.misses)
    for gone in [i for i in asm.items if i.id not in shown]:
        misses.append(NearMiss(gone.id, gone.kind, gone.tokens, "over_budget", gone.score))
    window_items = [
        ContextItem(f"turn:{st.id}", "turn", window.costs[st.id], "recent_window", tier="hot", turn_ids=(st.id,))
        for st in turns
    ]
    items = (
        [i for i in asm.items if i.id in stable_ids]
        + window_items
        + [i for i in asm.items if i.id in shown and i.id not in stable_ids]
    )
    step_notes = asm.notes + out.notes + [n for tid, n in history.excerpt_notes.items() if tid in shown]
    cache = _account(asm, layers, sections, turns, window, l4, out, inputs, deviation, anchored)
    if inputs.recall_stays:
        # What later calls show again: the window's blocks and the one leading it (trimmed turns' go).
        kept_ids = {st.id for st in turns} | ({t for t in stays if t != LEAD} if LEAD in stays else set())
        texts = {str(t): text for t, text in stays.items() if t in kept_ids}
        if keeps is not None:
            texts[str(keeps)] = l4
        cache["kept_recall"] = {"key": inputs.recall_key, "texts": texts}
        cache["layers"]["kept_recall"] = inputs.provider_tokens(
            sum(asm.tokenizer.count(stays[st.id]) for st in turns if st.id in stays)
            + (asm.tokenizer.count(stays[LEAD]) if LEAD in stays else 0)
        )
    manifest = Manifest(
        budget=asm.budget,
        total_tokens=out.total,
        items=tuple(items),
        near_misses=tuple(_resolve_duplicates(misses, shown)),
        policy=policy,
        query=asm.query,
        tokenizer=asm.tokenizer.name,
        notes=tuple(notes) + tuple(step_notes),
        cache=cache,
    )
    text = out.text
    if asm.fmt != "text":
        _, _, lines = render([st.turn for st in turns], asm.fmt)
        stable_text = "\n\n".join(sections[: layers.per_call_from])
        text = "\n\n".join(p for p in (stable_text, lines, l4) if p)
    system = out.system if asm.fmt == "anthropic" else None
    return Context(
        format=asm.fmt,
        messages=out.messages,
        system=system,
        text=text,
        manifest=manifest,
        system_blocks=out.system_blocks,
        cache_key=inputs.cache_key,
    )


def _account(
    asm: Assembly,
    layers: Layers,
    sections: list[str],
    turns: list[StoredTurn],
    window: Window,
    l4: str,
    out: _Out,
    inputs: CacheInputs,
    deviation: str | None,
    anchored: Anchored | None,
) -> dict[str, Any]:
    """The manifest's ``cache`` account (tokens in the provider's counting)."""
    count, pt = asm.tokenizer.count, inputs.provider_tokens
    per_layer: dict[str, int] = {"instructions": 0, "state": 0, "ledger": 0}
    texts: dict[str, list[str]] = {"instructions": [], "state": [], "ledger": []}
    for i, s in enumerate(sections[: layers.per_call_from]):
        layer = layers.of.get(i, "state")
        per_layer[layer] += count(s)
        texts[layer].append(s)
    per_layer["window"] = sum(window.costs[st.id] for st in turns)
    per_layer["per_call"] = count(l4) if l4 else 0
    stable = pt(out.stable)
    return {
        "layout": "cache",
        "stable_tokens": stable,
        "layers": {k: pt(v) for k, v in per_layer.items()},
        "stable_hash": stable_hash(out.stable_part),
        "layer_hashes": {k: stable_hash(v) for k, v in texts.items() if v},
        "breakpoints": out.breakpoints,
        "min_tokens": inputs.min_tokens,
        "cacheable": stable >= inputs.min_tokens,
        "cache_key": inputs.cache_key,
        "anchor": (
            {
                "turn": anchored.anchor,
                "jumped_at": anchored.jumped_at,
                "ledger_turn": anchored.anchor if anchored.ledger_before is None else anchored.ledger_before,
                "ledger_as_of": anchored.jumped_at if anchored.ledger_as_of is None else anchored.ledger_as_of,
            }
            if anchored is not None and anchored.anchor is not None
            else None
        ),
        "deviation": deviation,
    }
