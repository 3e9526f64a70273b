"""Configuration: one frozen object, one section per part, the seeds' defaults.

Configuration flows one way. The library takes a :class:`Config` (or uses the
defaults); it never reads the environment. The shells (CLI, MCP server, web)
build a :class:`Config` with this precedence, highest first:

1. command-line options,
2. ``STRATAMEM_*`` environment variables (see ``docs/configuration.md``),
3. the YAML file named by ``--config`` / ``STRATAMEM_CONFIG``,
4. the defaults below.

Unknown keys and wrongly typed values raise :class:`~stratamem.errors.ConfigError`;
a typo is never ignored.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._choices import register_choices, registered
from ._config_values import check_value
from .errors import ConfigError

__all__ = [
    "CompactionConfig",
    "Config",
    "ContextConfig",
    "EmbeddingConfig",
    "ItemsConfig",
    "LLMConfig",
    "PruningConfig",
    "PyramidConfig",
    "StateConfig",
    "StoreConfig",
    "register_choices",
]


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Storage limits and behaviour shared by every backend."""

    max_turn_chars: int = 4_000_000
    """Largest turn accepted, in characters of its canonical JSON (a 10 MB message is refused)."""
    busy_timeout_ms: int = 30_000
    """How long a writer waits for a lock before the store raises BackendError."""
    pg_min_connections: int = 1
    """PostgreSQL: connections each process's pool keeps open."""
    pg_max_connections: int = 8
    """PostgreSQL: most connections one process opens (mind the server's max_connections)."""
    pg_schema: str | None = None
    """PostgreSQL: schema holding the tables (default: the connection's search_path)."""


@dataclass(frozen=True, slots=True)
class PyramidConfig:
    """Segmentation, consolidation and tiers (seeds 000 and 002)."""

    preset: str = "pyramid"
    """``pyramid`` (10 -> 25 -> 100 turns), ``topics`` (topic -> bulk of 3) or ``custom``."""
    segmenter: str = "fixed"
    """``fixed`` (every N turns), ``topic`` (boundaries) or ``user_turn``."""
    micro_chunk_size: int = 10
    """Turns per level-1 segment with the fixed segmenter."""
    mini_chunk_size: int = 25
    """Turns per level-2 consolidation (seed 000 'mini')."""
    macro_chunk_size: int = 100
    """Turns per level-3 consolidation (seed 000 'macro')."""
    hot_chunks: int = 2
    """Most recent level-1 segments kept hot (full turns)."""
    hot_max_tokens: int = 50_000
    """Hot tier token budget; older segments are demoted past it."""
    warm_format: str = "ctf"
    """How warm segments hold their turns: ``ctf`` or ``json``."""
    cold_format: str = "summary_only"
    """What a cold segment keeps in the store besides its summary: ``summary_only`` (its content moves to
    the archive, seed 000's default) or ``ctf`` (its turns stay CTF-encoded in the node too, expandable
    without the archive; cleared when retention expires the node's archived content)."""
    warm_max_age_hours: float = 24 * 7
    """Warm segments older than this become cold (their content moves to the archive)."""
    auto_summarize: bool = True
    """Summarize segments and consolidations."""
    auto_extract_facts: bool = True
    """Extract key facts (at most 10 per chunk) and memory items from segments."""
    auto_embed: bool = True
    """Embed summaries (and turns) for semantic recall, when an embedder is configured."""
    archive_cold_content: bool = True
    """Keep cold content in the zstd archive, expandable on demand."""
    cold_retention_days: int = 90
    """Delete archived content after N days; 0 keeps it forever."""
    summarizer: str = "extractive"
    """``heuristic``, ``extractive`` (local, default) or ``llm``."""
    summarization_model: str | None = None
    """Model for the ``llm`` summarizer, if different from the chat model."""
    defer_summarization: bool = True
    """Summarize a segment when it is demoted from hot rather than when it is sealed."""
    boundary_phrases: tuple[str, ...] = (
        "new topic",
        "different topic",
        "another topic",
        "let's move on",
        "lets move on",
        "let us move on",
        "moving on",
        "change of subject",
        "change the subject",
        "changing the subject",
        "change topics",
        "changing topics",
        "switch topics",
        "switching topics",
        "different question",
        "unrelated question",
        "switching gears",
        "on another note",
        "on a different note",
    )
    """Phrases in a user turn that start a new topic (whole words, any case; ``’`` reads as ``'``)."""
    silence_minutes: float = 30.0
    """A gap this long between turns starts a new topic."""
    seal_idle_minutes: float = 30.0
    """A session quiet this long while the namespace's newest turn moved on has its open turns sealed
    (reason ``idle``), so a finished conversation's last turns get a summary and items too; 0: never."""
    subject_change_similarity: float = 0.45
    """Topic segmenter: a user turn starts a new topic when the mean stored vector of it and the 3 turns
    after it has a cosine below this with the topic's last 8 turns before it (seed 002's subject change;
    needs turn vectors; 0 turns it off). ``benchmarks/topic_boundaries.py`` measures it on LoCoMo."""
    topic_token_threshold: float = 0.60
    """Seal the current topic when it exceeds this share of its budget allocation."""
    max_message_chars: int = 2000
    """Escalation step 1: longer messages are truncated (with a marker) in the prompt view."""
    topic_summary_tokens: int = 200
    """Target size of a topic (level-1) summary."""
    bulk_summary_tokens: int = 300
    """Target size of a bulk (level-2) summary."""
    bulk_merge_size: int = 3
    """Topics merged into one bulk."""
    enabled: bool = True
    """Feed stored turns to the pyramid on every ``Memory.add`` (SQLite stores)."""
    summary_ratio: float = 0.25
    """A summary may use up to this share of its node's turn tokens (capped by the two targets above)."""
    retention_purges_turns: bool = False
    """Retention also deletes the canonical turns of expired cold segments (summaries and provenance stay)."""
    warm_max_turns: int = 100
    """Warm holds the segments beyond hot that lie within the namespace's newest N turns (seed 000: turns
    20-100); older segments are cold. 0: a segment is cold as soon as a top-level consolidation covers it."""
    consolidation_scope: str = "session"
    """``session``: consolidations (mini/macro chunks, bulks) merge one session's nodes only;
    ``namespace``: consecutive nodes of the whole namespace, across sessions."""


@dataclass(frozen=True, slots=True)
class ContextConfig:
    """How ``Memory.context`` allocates and fills a budget (seeds 000, 002, 004)."""

    policy: str = "hybrid"
    """A registered context policy: ``hybrid``, ``topics`` (50/30/20), ``pyramid`` (seed 000),
    ``state_first`` (seed 004 order) or ``recall`` (see ``stratamem.context.policies``)."""
    current_share: float = 0.50
    """Share of the budget for the current topic / recent window."""
    history_share: float = 0.30
    """Share for recalled history and topic summaries."""
    bulk_share: float = 0.20
    """Share for bulk / macro summaries."""
    short_buffer_turns: int = 20
    """Most recent turns considered for the window (seed 004: 20 to 80)."""
    default_budget: int = 4000
    """Budget used when the caller gives none."""
    record_manifests: bool = True
    """Store every assembled context's manifest (``stratamem manifests``); off for read-only stores."""
    keep_manifests: int = 1000
    """Newest manifests kept per namespace (and only as many as fit ``keep_manifest_bytes``)."""
    keep_full_manifests: int = 3
    """Newest manifests per namespace kept with every entry's score breakdown; older ones keep each
    entry's reason and ``fused`` score only (their brief form, ~40% of the bytes)."""
    keep_manifest_bytes: int = 131072
    """Stored bytes the kept manifests of a namespace may take together (the newest one is always kept);
    a 4,000-token LoCoMo prompt's manifest takes ~5 KB in full and ~2 KB brief: the default keeps ~65."""
    keep_store_manifest_bytes: int = 491520
    """Stored bytes the manifests of all namespaces may take together: each namespace keeps its newest,
    of the rest the store's oldest go first (else ten namespaces hold ten ``keep_manifest_bytes``)."""
    max_manifest_bytes: int = 16384
    """Most bytes one stored manifest takes: over it, near-misses go first (worst first), then the
    score breakdowns; the entries of what is in the prompt always stay."""
    dedup: bool = True
    """One copy of each fact in a context: a recalled turn, memory item or summary sentence
    already shown is left out, its manifest entry saying ``duplicate_of`` (docs/context.md)."""
    cache_layout: bool = False
    """Lay the prompt out for the provider's prompt cache: instructions, standing state, a
    chronological summary ledger and an anchored, append-only window first, byte-stable from
    call to call; what is recalled for this message last (docs/context.md, "Prompt caching")."""
    cache_recall_share: float = 0.03
    """Cache layout: share of the budget (after the fixed blocks) that material recalled for a
    conversational message may take (a question is assembled as without the layout)."""
    cache_ledger_share: float = 0.4
    """Cache layout: share of the budget (after the fixed blocks) for the summary ledger."""
    cache_anchor_step: float = 0.75
    """Cache layout: the window's start moves in steps of this share of its room (it jumps once
    per step of growth and stays put in between)."""
    cache_ledger_batch: int = 1
    """Cache layout: the summary ledger takes newly settled summaries at every this many jumps of
    the window's start (between them it holds still, and the history in between is not shown)."""
    cache_step_recall: bool = True
    """Cache layout: recall for a call that continues a tool loop (its newest turn a tool result);
    ``false``: only the request's first call gets it, the loop's steps keep their prefix whole."""
    cache_recall_stays: bool = True
    """Cache layout: a request's recall stays where it was first sent, after the request's words, on
    every later call that shows them (read back from the recorded manifests), instead of moving."""
    cache_cut_share: float = 0.1
    """Cache layout: a tool result larger than this share of the window's room is shown cut to it
    (head and tail kept, a marker naming the stored turn), the same bytes on every call."""
    cache_ttl: str = "5m"
    """Cache layout, Anthropic: lifetime of the breakpoints on the stable system blocks (``5m`` or
    ``1h``, which costs 2x to write); the rolling breakpoint on the conversation stays at 5 minutes."""
    cache_min_tokens: int | None = None
    """Cache layout: the shortest prefix the provider caches (default: the model's, from
    ``stratamem.records.usage.cache_rules``); a breakpoint before it is left out."""


@dataclass(frozen=True, slots=True)
class EmbeddingConfig:
    """Which embedder the shells build."""

    provider: str = "local"
    """``local`` (MiniLM, offline), ``openai`` (OpenAI-compatible endpoint) or ``none``."""
    model: str = "all-MiniLM-L6-v2"
    """Model name. With ``local`` it must name the model it runs (``all-MiniLM-L6-v2``): another
    name is a ConfigError, never silently ignored."""
    base_url: str | None = None
    """Endpoint for the ``openai`` provider (an error with ``local``)."""
    batch_size: int = 64
    """Texts per embedding call."""
    dimensions: int | None = None
    """Vector length of the ``openai`` provider's model (required there; an error with ``local``,
    whose MiniLM has 384)."""
    timeout_s: float = 60.0
    """Per-request timeout of the ``openai`` provider."""
    max_retries: int = 2
    """Retries of a transient failure of the ``openai`` provider."""
    threads: int | None = None
    """Worker threads of the ``local`` provider; ``None``: one per CPU, at most 4."""
    engine: str = "auto"
    """Forward pass of the ``local`` provider: ``auto`` (onnxruntime for bulk calls when
    installed, numpy otherwise), ``numpy`` or ``onnx`` (see ``stratamem.embed.LocalMiniLM``)."""
    cache: bool = True
    """Wrap the embedder in the store's content-hash cache (unchanged text is never re-embedded)."""
    passages: bool = False
    """Also embed the passages of long turns (over ~160 words, up to 8 per turn) and rank a
    turn by its best passage, so a fact deep in a long answer or tool output reaches the
    vector signal. Costs ~4 embeddings per long turn at write time and ~1.3 MB per 1,000
    such turns. Off by default: joint cross-validation on LoCoMo and the assistant-chat set
    did not keep it (docs/retrieval.md)."""
    sentences: bool = True
    """Also embed each sentence of short turns made of several (a fact said in passing), for questions
    that need several turns ("how many books have I finished?"). Costs ~1–2.5 embeddings per turn at
    write time and ~0.5–1 MB per 1,000 turns (docs/retrieval.md)."""
    approximate_from: int = 200_000
    """Rows from which recall scans a vector matrix through lists (IVF, ``stratamem.retrieve.ivf``)
    instead of every row, each matrix by its own rows: the turn vectors from this many turns, the
    sentence vectors (~2.5 a turn) from ~80k turns. Sublinear warm contexts at 1M turns; exact (and
    unchanged) below. 0: always exact."""
    probe: int = 64
    """Lists of 1,024 each approximate scan reads per query vector (more: closer to exact, slower)."""


@dataclass(frozen=True, slots=True)
class LLMConfig:
    """The chat model used by the ``llm`` summarizer and by compaction."""

    provider: str | None = None
    """``openai`` (any OpenAI-compatible endpoint) or ``anthropic``; ``None`` means no model."""
    model: str | None = None
    """Model name."""
    base_url: str | None = None
    """Endpoint (e.g. a local server's ``http://127.0.0.1:8000/v1``)."""
    timeout_s: float = 60.0
    """Per-call timeout."""
    max_retries: int = 2
    """Retries with exponential backoff after a failed call."""
    max_input_tokens: int = 60_000
    """Larger inputs are split and summarized in parts."""


@dataclass(frozen=True, slots=True)
class PruningConfig:
    """Tool-output pruning inside an agent loop (seed 001, layer 1)."""

    enabled: bool = True
    """Whether ``prune_tool_results`` changes anything."""
    soft_trim_chars: int = 4000
    """Tool results longer than this are trimmed to head + tail."""
    soft_trim_head: int = 1500
    """Characters kept from the start of a trimmed result."""
    soft_trim_tail: int = 1500
    """Characters kept from the end of a trimmed result."""
    hard_clear_after: int = 6
    """Results older than this many tool-result messages (from the end) are cleared."""
    keep_last_tool_results: int = 2
    """The most recent tool-result messages are never touched."""
    soft_trim_ratio: float | None = None
    """Optional: only soft-trim when the request exceeds this share of ``context_window``."""
    hard_clear_ratio: float | None = None
    """Optional: only hard-clear when the request exceeds this share of ``context_window``."""
    context_window: int | None = None
    """Model context window, needed by the ratio triggers."""
    epoch: int = 0
    """Prompt caching: let this many tool results wait past ``keep_last_tool_results``, then prune
    them in one pass, each once, so the cached prefix is rewritten once per epoch instead of a little
    every call; older ones again only when the budget forces it. 0: every call (docs/agentloop.md)."""


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """History compaction inside an agent loop (seed 001, layer 2)."""

    enabled: bool = True
    """Whether ``compact`` may run."""
    threshold: int = 100_000
    """Compact when system + history + output reserve exceeds this many tokens."""
    keep_recent_tokens: int = 20_000
    """Recent history kept verbatim after compaction."""
    keep_recent_turns: int = 3
    """Seed 001 phase 4, a dynamic window: the recent window grows past ``keep_recent_tokens`` to hold
    the last N user turns whole (tool-heavy work in progress), up to twice ``keep_recent_tokens`` and
    what the threshold leaves; 0 keeps it fixed."""
    retain_decisions_tokens: int = 2000
    """Seed 001 phase 4, priority retention: old turns with a decision in a user or assistant message
    stay verbatim after the checkpoint, newest first, up to this many tokens (and the room the threshold
    leaves); 0: only turns a ``compaction.before`` handler pins stay."""
    legacy_max_messages: int = 20
    """With compaction disabled, ``prepare_messages`` keeps the newest N messages (seed 001's legacy
    ``MAX_HISTORY_MESSAGES`` cap), cut at a real user turn; 0: no cap."""
    output_reserve: int = 16_000
    """The ``max_tokens`` the next call will request."""
    checkpoint_max_tokens: int = 3000
    """Upper bound for the checkpoint summary."""
    summary_tool_result_chars: int = 2000
    """Tool results are clipped to this many characters (head + tail) in the summarizer's input."""
    min_gain_ratio: float = 0.2
    """``prepare_messages`` compacts only when that frees at least this share of ``threshold``
    (estimated before any model call); 0 turns the rule off."""
    cooldown_calls: int = 2
    """After a compaction, ``prepare_messages`` does not compact again for this many calls (0: off)."""
    cooldown_tokens: int = 0
    """... nor before the request has grown by this many tokens since (0: off)."""
    hard_limit: int | None = None
    """A request (with ``output_reserve``) above this is compacted whatever the gain or cooldown
    (default: ``threshold`` × (1 + ``min_gain_ratio``)); set it to the model's context window or below."""
    seal_segment: bool = True
    """With a :class:`~stratamem.Memory` whose pyramid is on, a compaction seals the session's open turns."""
    extract_items: bool = True
    """With a :class:`~stratamem.Memory`, a checkpoint's decisions, constraints and critical context
    are stored as extracted memory items (cold, pending review), with the compacted turns as provenance."""
    cache_aware: bool = False
    """Prompt caching: below ``hard_limit``, put a compaction off while the tokens it would free are
    fewer than the cycle length that costs least at cache prices (every compaction rewrites the
    cached prefix); ``stratamem.wrap`` also marks the stable prefix with ``cache_control`` for
    Anthropic (docs/agentloop.md, "Prompt caching")."""


@dataclass(frozen=True, slots=True)
class ItemsConfig:
    """Long-term memory items and their tiers (seed 003)."""

    hot_token_limit: int = 4000
    """Hot items' token budget; adding past it spills."""
    warm_access_threshold: int = 3
    """Spilled items accessed more than this go warm, the rest cold."""
    promote_threshold: float = 0.85
    """Recall relevance above which an item is promoted to hot."""
    max_cold_items: int = 1000
    """Cold items beyond this trigger a prune suggestion."""
    auto_spill: bool = True
    """Spill automatically when an add would exceed the hot limit."""
    auto_promote: bool = True
    """Promote on recall above the threshold."""
    spill_count: int = 4
    """Items spilled per automatic spill."""
    promote_cooldown_s: float = 60.0
    """An item promoted less than this long ago is not evicted to make room for another
    recall's promotion (hysteresis, so alternating recalls do not thrash)."""
    recall_min_score: float = 0.3
    """Recall returns only items whose match score (0-1) reaches this; a recall that returns
    something counts as a hit."""
    max_pending_review: int = 500
    """Auto-extracted items waiting for review, at most, per namespace; past it the least salient
    pending items are ``dropped`` (kept, out of recall; their turns stay recallable)."""
    min_salience: float | None = None
    """Salience (0-1) a turn needs to give an auto-extracted item with the offline extractor;
    ``None``: 0.75 (``stratamem.items.extract.DEFAULT_MIN_SALIENCE``: kept turns ~80 % cited on LoCoMo, joined
    into accounts of several turns, ~150 items per 1,000 turns)."""
    extractor: str = "rules"
    """``rules`` (offline, default) or ``llm`` (pass ``Memory(extractor=LLMExtractor(...))``)."""
    prompt_pending: bool = True
    """Auto-extracted items still waiting for review may be recalled into contexts (confirmed and
    API items always may; rejected and dropped ones never)."""


@dataclass(frozen=True, slots=True)
class StateConfig:
    """Working state and project files (seed 004)."""

    min_tokens: int = 250
    """Lower end of the working state's prompt window."""
    max_tokens: int = 750
    """Upper end; the projection drops aged entries to fit and says what it left out."""
    decisions_max_age_days: float = 30.0
    """Decisions older than this leave the prompt projection (they stay in state.json)."""
    done_tasks_max_age_days: float = 2.0
    """Completed tasks older than this leave the prompt projection."""
    workdir: str = ".stratamem"
    """Directory (relative to the project) for session logs and derived files."""


@dataclass(frozen=True, slots=True)
class Config:
    """Everything configurable, with the seeds' defaults.

    Build with keywords (``Config(tokenizer="cl100k_base")``), from a mapping
    (:meth:`from_dict`) or from YAML (:meth:`from_yaml`); derive variants with
    :meth:`replace`.
    """

    tokenizer: str = "o200k_base"
    """Token encoding for every count: ``o200k_base``, ``cl100k_base`` or ``chars/4``."""
    store: StoreConfig = field(default_factory=StoreConfig)
    """Storage limits."""
    pyramid: PyramidConfig = field(default_factory=PyramidConfig)
    """Segmentation, consolidation, tiers, summarizers."""
    context: ContextConfig = field(default_factory=ContextConfig)
    """Context assembly."""
    embedding: EmbeddingConfig = field(default_factory=EmbeddingConfig)
    """Embedder choice."""
    llm: LLMConfig = field(default_factory=LLMConfig)
    """Chat model for summaries and compaction."""
    pruning: PruningConfig = field(default_factory=PruningConfig)
    """Tool-output pruning."""
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    """History compaction."""
    items: ItemsConfig = field(default_factory=ItemsConfig)
    """Memory items."""
    state: StateConfig = field(default_factory=StateConfig)
    """Working state."""

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Config:
        """Build a config from nested mappings; missing keys take defaults.

        Raises:
            ConfigError: Unknown key or wrongly typed value (the error names the key path).
        """
        return _build(cls, data, "")

    @classmethod
    def from_yaml(cls, path: str | Path) -> Config:
        """Load a YAML file holding the same structure as :meth:`from_dict`.

        Raises:
            ConfigError: Unreadable file, invalid YAML, unknown keys or bad values.
        """
        import yaml

        try:
            text = Path(path).read_text(encoding="utf-8")
        except OSError as exc:
            raise ConfigError(f"cannot read config file {path}: {exc}") from exc
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"invalid YAML in {path}: {exc}") from exc
        if data is None:
            return cls()
        if not isinstance(data, Mapping):
            raise ConfigError(f"{path}: the top level must be a mapping")
        return cls.from_dict(data)

    def to_dict(self) -> dict[str, Any]:
        """The config as nested plain values (tuples become lists)."""

        def plain(v: Any) -> Any:
            if dataclasses.is_dataclass(v):
                return {f.name: plain(getattr(v, f.name)) for f in dataclasses.fields(v)}
            if isinstance(v, tuple):
                return list(v)
            return v

        return plain(self)

    def replace(self, **changes: Any) -> Config:
        """A copy with top-level fields replaced; sections may be given as mappings of changes.

        Example: ``config.replace(pyramid={"micro_chunk_size": 5})``.
        """
        data = self.to_dict()
        for key, value in changes.items():
            if isinstance(value, Mapping) and isinstance(data.get(key), dict):
                data[key] = {**data[key], **value}
            elif dataclasses.is_dataclass(value):
                data[key] = Config.to_dict(value)  # type: ignore[arg-type]
            else:
                data[key] = value
        return Config.from_dict(data)


def _build(cls: type, data: Mapping[str, Any], prefix: str) -> Any:
    if not isinstance(data, Mapping):
        raise ConfigError(f"{prefix or 'config'}: expected a mapping")
    # Resolve against this module: public classes get __module__ = "stratamem".
    hints = typing.get_type_hints(cls, globalns=globals())
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = set(data) - names
    if unknown:
        raise ConfigError(f"unknown config key(s): {', '.join(prefix + k for k in sorted(unknown))}")
    kwargs = {k: check_value(v, hints[k], prefix + k, _build) for k, v in data.items()}
    obj = cls(**kwargs)
    _validate(obj, prefix)
    return obj


LOCAL_EMBEDDING_MODELS = ("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2")
"""The names ``embedding.model`` may take with the ``local`` provider: the model it runs."""

_CHOICES: dict[tuple[str, str], tuple[str, ...]] = {
    ("PyramidConfig", "preset"): ("pyramid", "topics", "custom"),
    ("PyramidConfig", "segmenter"): ("fixed", "topic", "user_turn"),
    ("PyramidConfig", "warm_format"): ("ctf", "json"),
    ("PyramidConfig", "cold_format"): ("summary_only", "ctf"),
    ("PyramidConfig", "summarizer"): ("heuristic", "extractive", "llm"),
    ("PyramidConfig", "consolidation_scope"): ("session", "namespace"),
    ("EmbeddingConfig", "provider"): ("local", "openai", "none"),
    ("EmbeddingConfig", "engine"): ("auto", "numpy", "onnx"),
    ("LLMConfig", "provider"): ("openai", "anthropic"),
    ("ItemsConfig", "extractor"): ("rules", "llm"),
    ("ContextConfig", "cache_ttl"): ("5m", "1h"),
}


def _validate(obj: Any, prefix: str) -> None:
    """Range and choice checks that types alone cannot express."""
    cls_name = type(obj).__name__
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        choices = registered(cls_name, f.name)
        choices = _CHOICES.get((cls_name, f.name)) if choices is None else choices
        if choices is not None and value is not None and value not in choices:
            raise ConfigError(f"{prefix}{f.name}: {value!r} is not one of {', '.join(choices)}")
        if isinstance(value, int | float) and not isinstance(value, bool) and value < 0:
            raise ConfigError(f"{prefix}{f.name}: must not be negative, got {value!r}")
    if isinstance(obj, ContextConfig):
        if min(obj.keep_manifests, obj.keep_manifest_bytes, obj.keep_store_manifest_bytes, obj.max_manifest_bytes) < 1:
            raise ConfigError(f"{prefix}keep_manifests, keep_*manifest_bytes and max_manifest_bytes must be at least 1")
        total = obj.current_share + obj.history_share + obj.bulk_share
        if abs(total - 1.0) > 1e-6:
            raise ConfigError(f"{prefix}current_share + history_share + bulk_share must be 1.0, got {total:g}")
        if obj.cache_recall_share + obj.cache_ledger_share >= 1:
            raise ConfigError(f"{prefix}cache_recall_share + cache_ledger_share must be below 1.0")
        if not 0 < obj.cache_anchor_step <= 1:
            raise ConfigError(f"{prefix}cache_anchor_step must be in (0, 1], got {obj.cache_anchor_step:g}")
        if obj.cache_ledger_batch < 1:
            raise ConfigError(f"{prefix}cache_ledger_batch must be at least 1, got {obj.cache_ledger_batch!r}")
        if not 0 < obj.cache_cut_share <= 1:
            raise ConfigError(f"{prefix}cache_cut_share must be in (0, 1], got {obj.cache_cut_share:g}")
    if isinstance(obj, EmbeddingConfig) and obj.probe < 1:
        raise ConfigError(f"{prefix}probe must be at least 1, got {obj.probe!r}")
    if isinstance(obj, EmbeddingConfig) and obj.provider == "local":
        # The local provider runs the one model it ships; a setting it would ignore is an error.
        if obj.model not in LOCAL_EMBEDDING_MODELS:
            raise ConfigError(
                f"{prefix}model: the local provider runs only all-MiniLM-L6-v2 (its weights ship with the "
                f"embeddings extra), got {obj.model!r}; for another model use provider openai (any "
                f"OpenAI-compatible endpoint, e.g. a local server)"
            )
        for key in ("base_url", "dimensions"):
            if getattr(obj, key) is not None:
                raise ConfigError(f"{prefix}{key} applies to the openai provider only; the local provider ignores it")
    if isinstance(obj, ItemsConfig) and obj.min_salience is not None and obj.min_salience > 1:
        raise ConfigError(f"{prefix}min_salience must be from 0 to 1, got {obj.min_salience!r}")
    if isinstance(obj, PyramidConfig):
        if min(obj.micro_chunk_size, obj.mini_chunk_size, obj.macro_chunk_size, obj.bulk_merge_size) < 1:
            raise ConfigError(f"{prefix}chunk sizes must be at least 1")
    if isinstance(obj, Config) and obj.tokenizer not in ("o200k_base", "cl100k_base"):
        try:
            ok = obj.tokenizer.startswith("chars/") and float(obj.tokenizer[6:]) > 0
        except ValueError:
            ok = False
        if not ok:
            raise ConfigError(f"tokenizer: {obj.tokenizer!r} is not o200k_base, cl100k_base or chars/N")
