"""LangGraph and LangChain adapters (extra ``stratamem[langgraph]``).

* :class:`StratamemStore` — a LangGraph ``BaseStore`` (long-term key-value memory
  shared across threads) kept in a stratamem store. Every version of every value
  is a turn, so nothing is overwritten in place: the current value of a key is
  its newest turn, a delete is a tombstone turn, and ``search(query=...)`` ranks
  by stratamem's hybrid recall (BM25 + vectors when the memory has an embedder).
* :class:`StratamemMiddleware` — a LangChain v1 ``AgentMiddleware`` whose
  ``before_model`` stores each new message as a turn, prunes old tool output and
  compacts the history (:class:`stratamem.agentloop.Compactor`) before every
  model call, rewriting the agent state so the live list stays short.
* :class:`LangChainChatModel` — any LangChain chat model as a stratamem
  :class:`~stratamem.llm.ChatModel` (the compaction summarizer).

Mapping: a LangGraph namespace ``("users", "u1")`` is the stratamem namespace
``lg.users.u1`` (labels escaped reversibly to stratamem's name alphabet); a key
is the session ``k.<key>``. TTL is not supported (``supports_ttl = False``).
"""

from __future__ import annotations

import json
import string
import threading
from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from langchain.agents.middleware import AgentMiddleware
from langchain_core.messages import RemoveMessage, SystemMessage, convert_to_messages, convert_to_openai_messages
from langgraph.graph.message import REMOVE_ALL_MESSAGES
from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
)

from ..agentloop import Compactor
from ..aio import AsyncMemory
from ..config import CompactionConfig, PruningConfig
from ..errors import ModelError, ValidationError
from ..llm import Completion
from ..memory import Memory
from ..records import StoredTurn, Turn, check_name

__all__ = ["LangChainChatModel", "StratamemMiddleware", "StratamemStore"]

_SAFE = frozenset(string.ascii_letters + string.digits + "_:@+-")
_META = "langgraph"


def _enc(label: str) -> str:
    """``label`` in stratamem's name alphabet; ``=XX`` escapes every other byte (reversible)."""
    return "".join(c if c in _SAFE else "".join(f"={b:02X}" for b in c.encode()) for c in label)


def _dec(text: str) -> str:
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] == "=":
            out.append(int(text[i + 1 : i + 3], 16))
            i += 3
        else:
            out += text[i].encode()
            i += 1
    return out.decode()


def _get_path(value: Mapping[str, Any], path: str) -> Any:
    cur: Any = value
    for part in path.split("."):
        if not isinstance(cur, Mapping) or part not in cur:
            return _MISSING
        cur = cur[part]
    return cur


_MISSING = object()
_OPS = {
    "$eq": lambda a, b: a == b,
    "$ne": lambda a, b: a != b,
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _matches(value: Mapping[str, Any], flt: Mapping[str, Any] | None) -> bool:
    """LangGraph filter semantics: equality per (dotted) field, or ``{"$op": x}`` comparisons."""
    for path, want in (flt or {}).items():
        got = _get_path(value, path)
        conds = want.items() if isinstance(want, Mapping) and want and all(k in _OPS for k in want) else [("$eq", want)]
        for op, operand in conds:
            if got is _MISSING:
                if op != "$ne":
                    return False
                continue
            try:
                if not _OPS[op](got, operand):
                    return False
            except TypeError:
                return False
    return True


class StratamemStore(BaseStore):
    """A LangGraph ``BaseStore`` on a stratamem store (SQLite or PostgreSQL).

    Args:
        memory: A ``Memory`` or ``AsyncMemory``; its store, settings and embedder are used
            (each LangGraph namespace gets its own ``Memory`` on that store). Not closed by the store.
        prefix: First label of every stratamem namespace this store writes (default ``lg``).

    ``batch`` and ``abatch`` both run on the ``AsyncMemory`` worker (``batch`` waits
    for it), so the store is safe to share with the other adapters of that memory.
    """

    supports_ttl = False

    def __init__(self, memory: Memory | AsyncMemory, *, prefix: str = "lg") -> None:
        if isinstance(memory, Memory):
            memory = AsyncMemory.wrap(memory)
        if not isinstance(memory, AsyncMemory):
            raise ValidationError(f"memory must be a Memory or AsyncMemory, got {type(memory).__name__}")
        self._amem = memory
        self._prefix = check_name(prefix, "prefix")
        self._lock = threading.RLock()
        self._mems: dict[str, Memory] = {}

    # --- mapping ----------------------------------------------------------------------

    def _ns_name(self, namespace: tuple[str, ...]) -> str:
        name = ".".join([self._prefix, *(_enc(label) for label in namespace)])
        return check_name(name, "namespace")

    def _ns_tuple(self, name: str) -> tuple[str, ...] | None:
        head, _, rest = name.partition(".")
        if head != self._prefix or not rest:
            return None
        return tuple(_dec(label) for label in rest.split("."))

    def _mem(self, ns_name: str) -> Memory:
        if ns_name not in self._mems:
            self._mems[ns_name] = self._amem.memory.for_namespace(ns_name)
        return self._mems[ns_name]

    def _latest(self, mem: Memory, key: str) -> StoredTurn | None:
        rows = mem.store.turns(mem.namespace, f"k.{_enc(key)}", newest_first=True, limit=1)
        if not rows or rows[0].turn.metadata.get(_META, {}).get("deleted"):
            return None
        return rows[0]

    def _item(
        self, st: StoredTurn, namespace: tuple[str, ...], score: float | None = None, search: bool = False
    ) -> Item:
        meta = st.turn.metadata[_META]
        created = datetime.fromisoformat(meta["created_at"])
        if search:
            return SearchItem(namespace, meta["key"], meta["value"], created, st.timestamp, score)
        return Item(
            value=meta["value"], key=meta["key"], namespace=namespace, created_at=created, updated_at=st.timestamp
        )

    def _live(self, ns_name: str) -> list[StoredTurn]:
        """The current version of every live key of a namespace."""
        mem = self._mem(ns_name)
        out = []
        for s in mem.store.sessions(ns_name):
            if s.name.startswith("k."):
                rows = mem.store.turns(ns_name, s.name, newest_first=True, limit=1)
                if rows and not rows[0].turn.metadata.get(_META, {}).get("deleted"):
                    out.append(rows[0])
        return out

    def _namespaces(self) -> list[tuple[str, tuple[str, ...]]]:
        names = self._amem.memory.store.namespaces()
        return [(n, t) for n in names if (t := self._ns_tuple(n)) is not None]

    # --- operations -------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run the operations in order on the memory's worker; puts to the same key: the last wins."""
        ops = list(ops)
        return self._amem.run_sync(lambda _m: self._batch(ops))

    def _batch(self, ops: list[Op]) -> list[Result]:
        with self._lock:
            results: list[Result] = []
            for op in ops:
                if isinstance(op, GetOp):
                    results.append(self._get(op))
                elif isinstance(op, SearchOp):
                    results.append(self._search(op))
                elif isinstance(op, PutOp):
                    self._put(op)
                    results.append(None)
                elif isinstance(op, ListNamespacesOp):
                    results.append(self._list(op))
                else:
                    raise ValidationError(f"unknown store operation {type(op).__name__}")
            return results

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on the ``AsyncMemory`` worker thread (the event loop never blocks on I/O)."""
        ops = list(ops)
        return await self._amem.run(lambda _m: self._batch(ops))

    def _get(self, op: GetOp) -> Item | None:
        ns_name = self._ns_name(op.namespace)
        st = self._latest(self._mem(ns_name), op.key)
        return self._item(st, op.namespace) if st is not None else None

    def _put(self, op: PutOp) -> None:
        if not isinstance(op.key, str) or not op.key:
            raise ValidationError("a key must be a non-empty string")
        mem = self._mem(self._ns_name(op.namespace))
        session = check_name(f"k.{_enc(op.key)}", "key")
        prev = self._latest(mem, op.key)
        now = datetime.now(UTC)
        if op.value is None:
            if prev is not None:
                mem.add(
                    Turn("user", "", timestamp=now, metadata={_META: {"key": op.key, "deleted": True}}), session=session
                )
            return
        if not isinstance(op.value, Mapping):
            raise ValidationError(f"a value must be a dict, got {type(op.value).__name__}")
        created = prev.turn.metadata[_META]["created_at"] if prev is not None else now.isoformat()
        meta = {_META: {"key": op.key, "value": dict(op.value), "created_at": created, "deleted": False}}
        mem.add(Turn("user", self._index_text(op), timestamp=now, metadata=meta), session=session)

    @staticmethod
    def _index_text(op: PutOp) -> str:
        """What recall indexes: the value, or only the fields ``index`` names; nothing for ``index=False``."""
        if op.index is False:
            return ""
        value = op.value or {}
        if op.index:
            parts = [_get_path(value, f) for f in op.index]
            return "\n".join(
                json.dumps(p, ensure_ascii=False) if not isinstance(p, str) else p for p in parts if p is not _MISSING
            )
        return json.dumps(value, ensure_ascii=False)

    def _search(self, op: SearchOp) -> list[SearchItem]:
        prefix = op.namespace_prefix
        found: list[tuple[float | None, SearchItem]] = []
        for ns_name, ns in self._namespaces():
            if ns[: len(prefix)] != tuple(prefix):
                continue
            live = [st for st in self._live(ns_name) if _matches(st.turn.metadata[_META]["value"], op.filter)]
            scores: dict[int, float] = {}
            if op.query and op.query.strip() and live:
                # Hybrid recall over every version; only current versions count.
                index = self._mem(ns_name)._recall_index()
                current = {st.id for st in live}
                for hit in index.search(op.query, k=max(50, 4 * (op.limit + op.offset))):
                    fused = hit.score.get("fused", 0.0)
                    for tid in hit.turn_ids:
                        if tid in current and fused > 0:
                            scores[tid] = max(scores.get(tid, 0.0), fused)
            for st in live:
                score = scores.get(st.id) if op.query else None
                found.append((score, self._item(st, ns, score, search=True)))  # type: ignore[arg-type]
        if op.query:
            # Matches first by score; values with no match after them, newest first.
            found.sort(key=lambda p: (p[0] is None, -(p[0] or 0.0), -p[1].updated_at.timestamp()))
        else:
            found.sort(key=lambda p: -p[1].updated_at.timestamp())
        return [item for _, item in found[op.offset : op.offset + op.limit]]

    def _list(self, op: ListNamespacesOp) -> list[tuple[str, ...]]:
        out: set[tuple[str, ...]] = set()
        for ns_name, ns in self._namespaces():
            if not self._live(ns_name):
                continue
            if not all(_condition(ns, c.match_type, tuple(c.path)) for c in op.match_conditions or ()):
                continue
            out.add(ns[: op.max_depth] if op.max_depth is not None else ns)
        return sorted(out)[op.offset : op.offset + op.limit]


def _condition(ns: tuple[str, ...], kind: str, path: tuple[str, ...]) -> bool:
    if len(path) > len(ns):
        return False
    part = ns[: len(path)] if kind == "prefix" else ns[len(ns) - len(path) :]
    return all(p == "*" or p == n for p, n in zip(path, part, strict=True))


# --- LangChain: compaction middleware -------------------------------------------------


class LangChainChatModel:
    """A LangChain chat model as a stratamem :class:`~stratamem.llm.ChatModel` (for compaction).

    Args:
        chat_model: Any ``BaseChatModel`` (e.g. ``ChatOpenAI``, or a fake one in tests).
        name: Model name reported in events (default: the model's ``model_name``/type).
    """

    def __init__(self, chat_model: Any, name: str | None = None) -> None:
        if not callable(getattr(chat_model, "invoke", None)):
            raise ValidationError("chat_model must be a LangChain chat model (with .invoke)")
        self.chat_model = chat_model
        self.model = name or str(getattr(chat_model, "model_name", None) or type(chat_model).__name__)

    def complete(self, system: str, messages: Sequence[Mapping[str, Any]], *, max_tokens: int) -> Completion:
        """One answer from the wrapped model.

        Raises:
            ModelError: The model failed or answered with no text.
        """
        try:
            reply = self.chat_model.invoke([SystemMessage(system), *convert_to_messages([dict(m) for m in messages])])
        except Exception as exc:  # any provider failure is a ModelError to the compactor
            raise ModelError(f"{type(exc).__name__}: {exc}") from exc
        text = reply.text if isinstance(getattr(reply, "text", None), str) else str(reply.content)
        if not text.strip():
            raise ModelError("the model answered with no text")
        usage = getattr(reply, "usage_metadata", None) or {}
        return Completion(text, usage.get("input_tokens"), usage.get("output_tokens"), self.model)


class StratamemMiddleware(AgentMiddleware):
    """Prune and compact the agent's messages before every model call, keeping every message in stratamem.

    Each conversation (LangGraph ``thread_id``, else ``default_session``) gets one
    :class:`~stratamem.agentloop.Compactor`: new messages are stored as turns of
    that session, old tool output is trimmed and cleared, and when the request
    nears ``compaction.threshold`` the old turns are replaced by a checkpoint
    written by ``model``. When anything changed, the agent state's messages are
    replaced by the prepared list (the removed text stays recallable in stratamem).

    Args:
        memory: A ``Memory`` or ``AsyncMemory`` (async agents run the work on its worker).
        model: Writes checkpoints: a stratamem ``ChatModel`` or a LangChain chat model.
            ``None`` truncates old history instead of summarizing it.
        compaction: Thresholds (default: the memory's ``config.compaction``).
        pruning: Tool-output limits (default: the memory's ``config.pruning``).
        default_session: Session for runs without a ``thread_id``.
    """

    def __init__(
        self,
        memory: Memory | AsyncMemory,
        *,
        model: Any = None,
        compaction: CompactionConfig | None = None,
        pruning: PruningConfig | None = None,
        default_session: str = "default",
    ) -> None:
        super().__init__()
        if isinstance(memory, Memory):
            memory = AsyncMemory.wrap(memory)
        if not isinstance(memory, AsyncMemory):
            raise ValidationError(f"memory must be a Memory or AsyncMemory, got {type(memory).__name__}")
        if model is not None and not callable(getattr(model, "complete", None)):
            model = LangChainChatModel(model)
        self.memory = memory
        self.model = model
        self.compaction = compaction
        self.pruning = pruning
        self.default_session = check_name(default_session, "session")
        self._compactors: dict[str, Compactor] = {}
        self._lock = threading.Lock()
        self.last_results: dict[str, Any] = {}
        """The latest :class:`~stratamem.agentloop.PrepareResult` per session (for inspection)."""

    def _session(self) -> str:
        try:
            from langgraph.config import get_config

            thread = (get_config().get("configurable") or {}).get("thread_id")
        except RuntimeError:  # called outside a graph run
            thread = None
        return check_name(str(thread), "session") if thread is not None else self.default_session

    def _prepare(self, session: str, messages: list[Any]) -> dict[str, Any] | None:
        with self._lock:
            compactor = self._compactors.get(session)
            if compactor is None:
                compactor = self._compactors[session] = Compactor(
                    self.model,
                    provider="openai",
                    memory=self.memory.memory,
                    session=session,
                    config=self.compaction,
                    pruning=self.pruning,
                )
            live = [dict(m) for m in convert_to_openai_messages(messages)]
            result = compactor.prepare_messages(live)
            self.last_results[session] = result
            changed = result.pruning.changed or result.compaction.status != "not_needed"
            if not changed:
                return None
            return {"messages": [RemoveMessage(id=REMOVE_ALL_MESSAGES), *convert_to_messages(live)]}

    def before_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """Store, prune and compact ``state["messages"]`` (see the class docs), on the memory's worker."""
        session = self._session()  # read the run's config here: the worker has no run context
        messages = list(state["messages"])
        return self.memory.run_sync(lambda _m: self._prepare(session, messages))

    async def abefore_model(self, state: Any, runtime: Any) -> dict[str, Any] | None:
        """:meth:`before_model` on the ``AsyncMemory`` worker thread."""
        session = self._session()  # read the run's config here: the worker has no run context
        messages = list(state["messages"])
        return await self.memory.run(lambda _m: self._prepare(session, messages))
