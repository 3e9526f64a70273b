"""Durability drills: crash, concurrent writers and faults, on any store URL or path.

Public so a deployment can run the same drills against its own PostgreSQL.
Every drill uses real child processes (``forkserver``: each child starts clean
from a process that imported only this module) writing through the public
store API. A child acknowledges a turn only after ``append`` returned, by
appending ``key`` lines to an acknowledgement file, so the parent knows
exactly which turns the store promised to keep.

Each turn carries its drill key in ``metadata["drill"]`` (or, for agent-loop
messages, as the first word of its text); :func:`check` counts keys in the
store and reports lost (acknowledged but missing), duplicated (stored more
than once) and sequence gaps.

The crash drill's child (:func:`memory_writer`) works through
:class:`~stratamem.Memory` with the pyramid on and small segment sizes
(:func:`drill_config`), so seals, consolidations, tier moves and archive
writes happen every few turns, and runs an agent loop whose
:class:`~stratamem.agentloop.Compactor` stores its messages as turns and
compacts every few steps with a checkpoint written by a
:class:`~stratamem.testing.llm_server.FakeLLMServer` the parent serves. After
every kill the parent checks the turns, the derived data
(:func:`stratamem.testing.consistency.check_derived`) and that a reopened
memory takes new turns and resumes the pyramid.

Used by ``tests/test_durability.py`` (few trials) and
``benchmarks/store_bench.py`` (the full counts).
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
import traceback
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..memory import Memory
from ..records import Turn
from ..store.base import Store, TurnBatch
from ..store.open import open_store
from .consistency import DerivedCheck, check_derived
from .drill_records import DrillCheck, _turns, check, drill_key, read_acks, read_errors, read_phase
from .llm_server import FakeLLMServer, checkpoint_reply
from .workload import drill_config, memory_writer, resume

__all__ = [
    "CrashResult",
    "DrillCheck",
    "FaultResult",
    "RestartResult",
    "WriterResult",
    "check",
    "crash_drill",
    "disk_full_drill",
    "drill_config",
    "drill_key",
    "memory_writer",
    "read_only_drill",
    "restart_drill",
    "run_writers",
    "writer",
]

_CTX = multiprocessing.get_context("forkserver")
# Children fork from a server that already loaded this module, the tokenizer and openai (~1.4 s each).
_CTX.set_forkserver_preload([__name__, f"{__package__}._preload"])


def writer(
    target: str,
    namespace: str,
    worker: str,
    ack_path: str,
    *,
    turns: int | None,
    sessions: list[str],
    max_batch: int = 8,
    text_size: int = 200,
    seed: int = 0,
) -> None:
    """Append drill turns until ``turns`` are stored (forever if None), acknowledging each batch.

    Runs in a child process. Each batch goes to one or two of ``sessions``
    (two exercise multi-session transactions). Errors are recorded as ``!``
    lines and end the writer with exit status 1.
    """
    rng = random.Random(seed)
    fd = os.open(ack_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        store = open_store(target)
        started = time.time()
        done = 0
        while turns is None or done < turns:
            n = rng.randint(1, max_batch) if turns is None else min(rng.randint(1, max_batch), turns - done)
            chosen = rng.sample(sessions, k=min(len(sessions), rng.choice((1, 1, 1, 2))))
            split = rng.randint(1, n - 1) if len(chosen) == 2 and n > 1 else n
            new = _turns(worker, done, n, text_size)
            batches = [TurnBatch(chosen[0], new[:split], [10] * split)]
            if split < n:
                batches.append(TurnBatch(chosen[1], new[split:], [10] * (n - split)))
            store.append(namespace, batches)
            # Acknowledge only after append returned: the store has promised these.
            os.write(fd, "".join(f"{t.metadata['drill']}\n" for t in new).encode())
            done += n
        os.write(fd, f"!!done {done} {started:.6f} {time.time():.6f}\n".encode())
        store.close()
    except BaseException as exc:  # noqa: BLE001 - the parent reads and asserts on this line
        os.write(fd, f"!{type(exc).__name__}: {exc}\n".encode())
        traceback.print_exc()
        os._exit(1)
    finally:
        os.close(fd)


@dataclass(frozen=True, slots=True)
class WriterResult:
    """Outcome of :func:`run_writers`."""

    check: DrillCheck
    """Store contents against acknowledgements."""
    errors: list[str]
    """Error lines writers recorded (empty when all succeeded)."""
    seconds: float
    """Wall time from the first writer's first append to the last writer's last one
    (process start-up and store opening excluded)."""
    turns_per_second: float
    """Acknowledged turns divided by ``seconds``."""


def run_writers(
    target: str,
    namespace: str,
    workdir: str | Path,
    *,
    writers: int,
    turns_each: int,
    shared_sessions: int = 1,
    text_size: int = 200,
    max_batch: int = 8,
    timeout_s: float = 600,
) -> WriterResult:
    """Run ``writers`` processes appending ``turns_each`` turns each, on shared and own sessions.

    Returns:
        Loss/duplicate/gap counts, writer errors and throughput.
    """
    workdir = Path(workdir)
    procs = []
    start = time.perf_counter()
    for w in range(writers):
        sessions = [f"shared{i}" for i in range(shared_sessions)] + [f"own{w}"]
        ack = str(workdir / f"ack-{namespace}-{w}.txt")
        Path(ack).unlink(missing_ok=True)  # acknowledgements of an earlier run must not count
        p = _CTX.Process(
            target=writer,
            args=(target, namespace, f"w{w}", ack),
            kwargs={
                "turns": turns_each,
                "sessions": sessions,
                "max_batch": max_batch,
                "text_size": text_size,
                "seed": w,
            },
        )
        p.start()
        procs.append((p, ack))
    for p, _ in procs:
        p.join(timeout_s)
        if p.is_alive():
            p.kill()
            p.join()
    acked = [k for _, ack in procs for k in read_acks(ack)]
    errors = [e for _, ack in procs for e in read_errors(ack) if not e.startswith("!done")]
    # A writer that died before writing anything must not pass as "no errors".
    errors += [f"writer {w} exited with {p.exitcode}" for w, (p, _) in enumerate(procs) if p.exitcode != 0]
    spans = [tuple(map(float, e.split()[2:4])) for _, ack in procs for e in read_errors(ack) if e.startswith("!done")]
    seconds = (max(b for _, b in spans) - min(a for a, _ in spans)) if spans else time.perf_counter() - start
    store = open_store(target)
    try:
        result = check(store, namespace, acked)
    finally:
        store.close()
    return WriterResult(result, errors, seconds, len(acked) / seconds if seconds else 0.0)


# --- crash ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CrashResult:
    """Outcome of :func:`crash_drill`."""

    trials: int
    """Kills performed."""
    check: DrillCheck
    """Final store contents against every acknowledgement."""
    failed_trials: list[int] = field(default_factory=list)
    """Trials after which a check failed."""
    unacknowledged_stored: int = 0
    """Turns committed but killed before their acknowledgement (allowed)."""
    derived: DerivedCheck | None = None
    """Final derived-data check (``None`` for the store-only drill)."""
    phases: dict[str, int] = field(default_factory=dict)
    """What the children were doing when killed, counted per phase."""
    failures: list[str] = field(default_factory=list)
    """What went wrong in the failed trials (first problems of each)."""
    shape: dict[str, int] = field(default_factory=dict)
    """What the drill built: nodes per level, warm and archived segments, compactions."""


def _shape(target: str, namespace: str) -> dict[str, int]:
    mem = Memory(open_store(target), namespace=namespace, config=drill_config())
    try:
        out = {f"level {s.level} nodes": s.nodes for s in mem.pyramid.level_stats()}
        out["warm segments"] = len(mem.pyramid.nodes(level=1, tier="warm"))
        out["cold segments"] = len(mem.pyramid.nodes(level=1, tier="cold"))
        out["archived segments"] = sum(n.archive_ref is not None for n in mem.pyramid.nodes(level=1, tier="cold"))
        state = mem.store.conversations.get(namespace, "agent")
        out["compactions"] = state.compaction_count if state else 0
        out["compaction fallbacks"] = state.failures if state else 0
        # Messages the agent session stores that its saved state does not count (a kill fell
        # between the store and the state save, and no later sync has recounted yet).
        out["agent messages not counted in state"] = len(mem.turns("agent")) - (state.turn_count if state else 0)
        out["extracted items"] = sum(it.source == "extracted" for it in mem.items.list())
    finally:
        mem.close()
    return out


def crash_drill(
    target: str,
    namespace: str,
    workdir: str | Path,
    *,
    trials: int,
    seed: int = 0,
    max_delay_s: float | None = None,
    derived: bool = True,
    fail_share: float = 0.2,
    max_progress: int | None = None,
) -> CrashResult:
    """Kill a working child with SIGKILL ``trials`` times; check the store after every kill.

    Each child continues the same sessions as every earlier child, so
    sequences must continue gap-free across crashes.

    Args:
        target: SQLite path or PostgreSQL URL.
        namespace: Namespace the drill writes.
        workdir: Where acknowledgement files go.
        trials: Number of kills.
        seed: Makes kill moments and child behaviour reproducible.
        max_delay_s: Kill at a uniform moment up to this long after the child
            acknowledged its quota of turns (default 0.05 s store-only, 0.2 s derived).
        max_progress: Each child's quota is drawn from 1..this many acknowledged
            turns (default 1 store-only, 60 derived).
        derived: ``True``: the child is :func:`memory_writer` (pyramid and
            compaction), and after each kill the derived data is checked
            (:func:`~stratamem.testing.consistency.check_derived`) and a reopened
            memory must take two more turns and resume the pyramid.
            ``False``: the child appends through the store only (:func:`writer`).
        fail_share: Share of trials in which the summarizer's next call fails
            (HTTP 500), so compaction's fallback path is crashed into too.
    """
    rng = random.Random(seed)
    workdir = Path(workdir)
    delay = max_delay_s if max_delay_s is not None else (0.2 if derived else 0.05)
    max_progress = max_progress or (60 if derived else 1)
    acked: list[str] = []
    failed: list[int] = []
    failures: list[str] = []
    phases: Counter[str] = Counter()
    last, last_derived = DrillCheck(0, 0, 0, 0, 0), None
    server = FakeLLMServer(reply=checkpoint_reply).start() if derived else None
    try:
        for trial in range(trials):
            ack = str(workdir / f"crash-{namespace}-{trial}.txt")
            Path(ack).unlink(missing_ok=True)
            child_seed = seed * 100_000 + trial
            if server is not None:
                if rng.random() < fail_share:
                    server.fail_next(1, status=500)
                p = _CTX.Process(
                    target=memory_writer,
                    args=(target, namespace, f"c{trial}", ack),
                    kwargs={"llm_url": server.openai_base_url, "seed": child_seed},
                )
            else:
                p = _CTX.Process(
                    target=writer,
                    args=(target, namespace, f"c{trial}", ack),
                    kwargs={"turns": None, "sessions": ["main", "side"], "max_batch": 16, "seed": child_seed},
                )
            p.start()
            deadline = time.monotonic() + 60
            # Kill while working: after some acknowledgements (so each child does a similar amount
            # of work however loaded the machine is), at a random moment.
            progress = rng.randint(1, max_progress)
            while len(read_acks(ack)) < progress and p.is_alive() and time.monotonic() < deadline:
                time.sleep(0.002)
            time.sleep(rng.uniform(0, delay))
            if p.is_alive():
                os.kill(p.pid, signal.SIGKILL)  # type: ignore[arg-type]
            p.join()
            phases[read_phase(ack)] += 1
            got = read_acks(ack)
            acked.extend(got)
            problems = [e for e in read_errors(ack) if not e.startswith("!done")]
            # A child that died on its own, or never got anything stored, tested nothing.
            if p.exitcode != -signal.SIGKILL:
                problems.append(f"child exited with {p.exitcode} before it was killed")
            elif not got:
                problems.append("child stored nothing before it was killed")
            store = open_store(target)
            try:
                last = check(store, namespace, acked)
            finally:
                store.close()
            if derived:
                mem = Memory(open_store(target), namespace=namespace, config=drill_config())
                try:
                    last_derived = check_derived(mem)
                finally:
                    mem.close()
                problems += list(last_derived.problems)
                if last_derived.ok:  # resuming on broken data would only pile up more problems
                    keys, resumed = resume(target, namespace, trial)
                    acked.extend(keys)
                    problems += resumed
            if not last.ok or problems or (last_derived is not None and not last_derived.ok):
                failed.append(trial)
                failures.append(
                    f"trial {trial} (killed in {read_phase(ack)}): " + "; ".join(problems[:3] or [repr(last)])
                )
        shape: dict[str, int] = {}
        if derived:
            store = open_store(target)
            try:
                last = check(store, namespace, acked)
            finally:
                store.close()
            mem = Memory(open_store(target), namespace=namespace, config=drill_config())
            try:
                last_derived = check_derived(mem)
            finally:
                mem.close()
            shape = _shape(target, namespace)
    finally:
        if server is not None:
            server.close()
    return CrashResult(
        trials, last, failed, last.stored - last.acknowledged, last_derived, dict(phases), failures, shape
    )


# --- faults ---------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FaultResult:
    """Outcome of a fault drill: the error seen and whether the store recovered."""

    fault: str
    """Which fault was injected."""
    error: str
    """``Type: message`` of what the faulted write raised (empty if nothing)."""
    faulted_stored: int
    """Turns of the faulted batch found afterwards (0 or the whole batch)."""
    faulted_size: int
    """Turns in the faulted batch."""
    served_during: bool
    """Reads worked while the fault was active."""
    served_after: bool
    """The same store object wrote and read again after the fault cleared."""
    check: DrillCheck
    """Store contents against acknowledgements."""

    @property
    def ok(self) -> bool:
        """Clear error, all-or-nothing batch, still serving, store consistent."""
        return (
            self.error.startswith("BackendError")
            and self.faulted_stored in (0, self.faulted_size)
            and self.served_during
            and self.served_after
            and self.check.ok
        )


def _fault_child(kind: str, path: str, workdir: str) -> None:
    """Child side of :func:`disk_full_drill` and :func:`read_only_drill`."""
    import json
    import resource

    out: dict[str, Any] = {"error": "", "served_during": False, "served_after": False, "acked": []}
    try:
        if kind == "read_only" and os.geteuid() == 0:
            # root ignores file modes; drop to nobody so the read-only file bites.
            os.setgid(65534)
            os.setuid(65534)
        store = open_store(path)
        if kind == "disk_full":
            store.append("ns", [TurnBatch("s", _turns("before", 0, 5, 200), [10] * 5)])
            out["acked"] += [f"before-{i}" for i in range(5)]
            soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
            # Writing past the limit would kill us with SIGXFSZ; ignored, the write fails with EFBIG.
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
            biggest = max(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))
            resource.setrlimit(resource.RLIMIT_FSIZE, (biggest + 16_384, hard))
        try:
            store.append("ns", [TurnBatch("s", _turns("faulted", 0, 300, 2000), [10] * 300)])
        except Exception as exc:  # noqa: BLE001 - the fault's error, whatever it is, is the drill's result
            out["error"] = f"{type(exc).__name__}: {exc}"
        out["served_during"] = len(store.turns("ns", limit=3)) > 0
        if kind == "disk_full":
            resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
        else:
            Path(workdir, "faulted").write_text("1")
            deadline = time.monotonic() + 30
            while not Path(workdir, "cleared").exists() and time.monotonic() < deadline:
                time.sleep(0.01)
        store.append("ns", [TurnBatch("s", _turns("after", 0, 5, 200), [10] * 5)])
        out["acked"] += [f"after-{i}" for i in range(5)]
        out["served_after"] = len(store.turns("ns", min_seq=1)) > 0
        store.close()
    except Exception as exc:  # noqa: BLE001 - recorded in result.json for the parent to assert on
        out["error"] = out["error"] or f"unexpected {type(exc).__name__}: {exc}"
    Path(workdir, "result.json").write_text(json.dumps(out))


def _run_fault(kind: str, path: str, workdir: Path, acked_before: list[str]) -> FaultResult:
    import json

    p = _CTX.Process(target=_fault_child, args=(kind, path, str(workdir)))
    p.start()
    if kind == "read_only":
        deadline = time.monotonic() + 30
        while not (workdir / "faulted").exists() and p.is_alive() and time.monotonic() < deadline:
            time.sleep(0.01)
        # The fault clears: the database and the -wal/-shm files SQLite created
        # while it was read-only (with its read-only mode) become writable.
        for f in (path, path + "-wal", path + "-shm"):
            if os.path.exists(f):
                os.chmod(f, 0o666)
        (workdir / "cleared").write_text("1")
    p.join(60)
    out = json.loads((workdir / "result.json").read_text())
    store = open_store(path)
    try:
        faulted = sum(1 for t in store.turns("ns") if str(t.turn.metadata.get("drill", "")).startswith("faulted-"))
        result = check(store, "ns", acked_before + out["acked"])
    finally:
        store.close()
    return FaultResult(kind, out["error"], faulted, 300, out["served_during"], out["served_after"], result)


def disk_full_drill(workdir: str | Path) -> FaultResult:
    """A SQLite writer hits a file-size limit (``RLIMIT_FSIZE``) mid-batch, then the limit is lifted."""
    workdir = Path(workdir)
    return _run_fault("disk_full", str(workdir / "full.db"), workdir, [])


def read_only_drill(workdir: str | Path) -> FaultResult:
    """A SQLite store opened on a read-only file refuses a batch, then writes once the file is writable.

    When run as root the child drops to ``nobody`` (root ignores file modes),
    so ``workdir`` and its parents must be reachable by ``nobody``.
    """
    workdir = Path(workdir)
    path = str(workdir / "ro.db")
    store = open_store(path)
    store.append("ns", [TurnBatch("s", _turns("before", 0, 5, 200), [10] * 5)])
    store.close()
    os.chmod(workdir, 0o777)
    os.chmod(path, 0o444)
    return _run_fault("read_only", path, workdir, [f"before-{i}" for i in range(5)])


@dataclass(frozen=True, slots=True)
class RestartResult:
    """Outcome of :func:`restart_drill`."""

    batches: int
    """Batches attempted."""
    failed: list[int]
    """Batches whose ``append`` raised (the restart hit them)."""
    errors: list[str]
    """The messages those batches raised."""
    partial: list[int]
    """Batches stored only in part (must be empty)."""
    lost: list[int]
    """Acknowledged batches missing from the store (must be empty)."""
    gap_free: bool
    """The session's sequence numbers are exactly 1..n."""
    served_after: bool
    """The same store object stored a batch after the restart."""

    @property
    def ok(self) -> bool:
        """The restart hit a batch, nothing partial or lost, and the store kept serving."""
        return bool(self.failed) and not self.partial and not self.lost and self.gap_free and self.served_after


def restart_drill(
    store: Store,
    restart: Callable[[], None],
    *,
    batch_turns: int = 2000,
    successes_after: int = 2,
    max_restarts: int = 5,
) -> RestartResult:
    """Append batches in a thread while ``restart()`` restarts the database server.

    Every acknowledged batch must be stored whole; every failed one whole or
    not at all; and the same ``store`` must store again after the restart.
    The server is restarted while a batch is in flight, again (at most
    ``max_restarts`` times) until a restart has interrupted one.
    """
    outcomes: list[tuple[int, str]] = []
    restarted = threading.Event()
    stop = threading.Event()
    in_flight = threading.Event()

    def ingest() -> None:
        n, after = 0, 0
        while not stop.is_set() and after < successes_after:
            turns = [
                Turn(role="user", content=f"b{n}-{i} " + "x" * 300, metadata={"batch": n}) for i in range(batch_turns)
            ]
            try:
                in_flight.set()
                store.append("restart", [TurnBatch("s", turns, [5] * batch_turns)])
                outcomes.append((n, "ok"))
                after += restarted.is_set()
            except Exception as exc:  # noqa: BLE001 - recorded and asserted on by the caller
                outcomes.append((n, f"{type(exc).__name__}: {exc}"))
                time.sleep(0.05)
            in_flight.clear()
            n += 1

    t = threading.Thread(target=ingest)
    t.start()
    try:
        while len(outcomes) < 2 and t.is_alive():
            time.sleep(0.005)
        # Restart while a batch is being written: between batches (fast on an idle machine)
        # the pool would just wait for the server and the restart would interrupt nothing.
        # A fast machine can still finish the batch before the server goes down, so restart
        # again (up to ``max_restarts``) until one restart has interrupted a batch.
        for _ in range(max_restarts):
            in_flight.clear()
            in_flight.wait(30)
            before = len(outcomes)
            restart()
            while len(outcomes) <= before and t.is_alive():
                time.sleep(0.005)
            if any(o != "ok" for _, o in outcomes[before:]) or not t.is_alive():
                break
        restarted.set()
        t.join(300)
    finally:
        stop.set()
        t.join(30)
    per_batch: Counter[int] = Counter(st.turn.metadata["batch"] for st in store.iter_turns("restart"))
    seqs = [st.seq for st in store.turns("restart", "s")]
    failed = [n for n, o in outcomes if o != "ok"]
    return RestartResult(
        len(outcomes),
        failed,
        [o for _, o in outcomes if o != "ok"],
        [n for n in per_batch if per_batch[n] not in (0, batch_turns)],
        [n for n, o in outcomes if o == "ok" and per_batch[n] != batch_turns],
        seqs == list(range(1, len(seqs) + 1)),
        bool(outcomes) and outcomes[-1][1] == "ok",
    )
