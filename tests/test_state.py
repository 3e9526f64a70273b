"""Working state: validation, updates, ageing and budget in the projection, instruction files, session logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
import toon_format
from hypothesis import given, settings
from hypothesis import strategies as st

from stratamem.config import StateConfig
from stratamem.errors import BudgetError, DecodeError, NotFoundError, ValidationError
from stratamem.state.instructions import load_instructions
from stratamem.state.sessionlog import SessionLogs
from stratamem.state.working import WorkingState, validate_state
from stratamem.tokens import get_tokenizer

TOK = get_tokenizer("o200k_base")
START = datetime(2026, 1, 31, 12, 0, tzinfo=UTC)


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.at = START

    def __call__(self) -> datetime:
        return self.at

    def advance(self, **kw: float) -> None:
        self.at += timedelta(**kw)


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def state(tmp_path, clock) -> WorkingState:
    return WorkingState(tmp_path, "proj", tokenizer=TOK, clock=clock)


def test_a_new_state_is_empty_and_valid(state):
    doc = state.read()
    assert doc == {
        "schema_version": 1,
        "updated_at": "2026-01-31T12:00:00Z",
        "goal": "",
        "now": "",
        "decisions": [],
        "tasks": [],
        "conventions": {},
    }
    assert not state.path.exists()


def test_updates_are_stamped_and_written_with_the_derived_toon(state, clock):
    state.set_goal("Ship the memory layer")
    clock.advance(minutes=5)
    state.set_now("Writing the projection")
    decision = state.decide("Use TOON in prompts", "fewer tokens")
    task = state.add_task("Write schema")
    state.set_convention("language", "Python")
    assert decision == {
        "id": "D-1",
        "title": "Use TOON in prompts",
        "why": "fewer tokens",
        "ts": "2026-01-31T12:05:00Z",
    }
    assert task == {"id": "T-1", "title": "Write schema", "status": "open", "updated_at": "2026-01-31T12:05:00Z"}
    on_disk = json.loads(state.path.read_text(encoding="utf-8"))
    assert on_disk["goal"] == "Ship the memory layer" and on_disk["updated_at"] == "2026-01-31T12:05:00Z"
    assert state.toon_path.read_text(encoding="utf-8") == (
        "goal: Ship the memory layer\n"
        "now: Writing the projection\n"
        "tasks[1]{id,title,status}:\n"
        "  T-1,Write schema,open\n"
        "decisions[1]{id,title,why,date}:\n"
        "  D-1,Use TOON in prompts,fewer tokens,2026-01-31\n"
        "conventions:\n"
        "  language: Python\n"
    )
    assert toon_format.loads(state.toon_path.read_text(encoding="utf-8")) == state.project().view


def test_tasks_move_through_statuses_and_can_be_removed(state, clock):
    state.add_task("a")
    state.add_task("b", id="build-1")
    clock.advance(hours=1)
    assert state.update_task("T-1", status="blocked", note="waiting on review")["updated_at"] == "2026-01-31T13:00:00Z"
    state.complete_task("build-1")
    state.remove_task("T-1")
    assert [(t["id"], t["status"]) for t in state.read()["tasks"]] == [("build-1", "done")]
    assert state.add_task("c")["id"] == "T-1"
    with pytest.raises(NotFoundError, match="no task 'nope'"):
        state.update_task("nope", status="done")


@pytest.mark.parametrize(
    ("change", "path", "schema_path"),
    [
        pytest.param(
            lambda s: s.add_task("x", status="finished"),
            "$.tasks[0].status",
            "/properties/tasks/items/properties/status/enum",
            id="status",
        ),
        pytest.param(
            lambda s: s.add_task(""),
            "$.tasks[0].title",
            "/properties/tasks/items/properties/title/minLength",
            id="empty-title",
        ),
        pytest.param(lambda s: s.set_goal(7), "$.goal", "/properties/goal/type", id="goal-type"),
        pytest.param(
            lambda s: s.decide("d", id="bad id!"),
            "$.decisions[0].id",
            "/properties/decisions/items/properties/id/pattern",
            id="id-pattern",
        ),
        pytest.param(lambda s: s.set_now("x" * 2001), "$.now", "/properties/now/maxLength", id="too-long"),
    ],
)
def test_invalid_updates_are_refused_with_the_schema_path_and_change_nothing(state, change, path, schema_path):
    state.set_goal("keep me")
    before = state.path.read_bytes(), state.toon_path.read_bytes()
    with pytest.raises(ValidationError) as info:
        change(state)
    assert info.value.path == path
    assert f"(schema path {schema_path})" in str(info.value)
    assert (state.path.read_bytes(), state.toon_path.read_bytes()) == before


def test_duplicate_ids_are_refused(state):
    state.add_task("a", id="T-9")
    with pytest.raises(ValidationError, match="duplicate id 'T-9'") as info:
        state.add_task("b", id="T-9")
    assert info.value.path == "$.tasks[1].id"


def test_replace_validates_the_whole_document(state):
    doc = state.read()
    doc["extra"] = 1
    with pytest.raises(ValidationError, match="Additional properties") as info:
        state.replace(doc)
    assert info.value.path == "$"
    doc = state.read()
    doc["tasks"] = [{"id": "T-1", "title": "x", "status": "open", "updated_at": "2026-02-30T00:00:00Z"}]
    with pytest.raises(ValidationError, match="not a valid date-time") as info:
        state.replace(doc)
    assert info.value.path == "$.tasks[0].updated_at"
    assert not state.path.exists()


def test_a_hand_broken_state_file_is_reported(state):
    state.set_goal("x")
    state.path.write_text("{not json", encoding="utf-8")
    with pytest.raises(DecodeError, match="not valid JSON"):
        state.read()


def test_done_tasks_and_old_decisions_age_out_of_the_projection_but_stay_in_the_file(state, clock):
    state.decide("old decision", "history")
    state.add_task("finished long ago")
    state.complete_task("T-1")
    clock.advance(days=3)
    state.add_task("still open")
    state.decide("fresh decision", "now")
    p = state.project()
    assert [t["id"] for t in p.view["tasks"]] == ["T-2"]
    assert [d["id"] for d in p.view["decisions"]] == ["D-2", "D-1"]  # newest first
    assert [(o.kind, o.id, o.reason) for o in p.omitted] == [("task", "T-1", "aged")]
    clock.advance(days=28)
    p = state.project()
    assert [(o.kind, o.id, o.reason) for o in p.omitted] == [("task", "T-1", "aged"), ("decision", "D-1", "aged")]
    assert len(state.read()["tasks"]) == 2 and len(state.read()["decisions"]) == 2


def test_the_projection_keeps_within_the_budget_and_names_what_it_left_out(state, clock):
    state.set_goal("Keep the whole history usable inside a fixed token budget")
    for i in range(60):
        clock.advance(minutes=1)
        state.add_task(f"task number {i} with a fairly long descriptive title about work item {i}")
    for budget in (250, 400, 750):
        p = state.project(budget)
        assert p.tokens == TOK.count(p.text) <= budget
        kept = {t["id"] for t in p.view["tasks"]}
        left = {o.id for o in p.omitted if o.reason == "budget"}
        assert kept | left == {f"T-{i}" for i in range(1, 61)} and not kept & left
        # Newest tasks win the room.
        assert "T-60" in kept and "T-1" in left


def test_oversized_goal_and_now_are_shortened_and_reported(tmp_path, clock):
    config = StateConfig(min_tokens=20, max_tokens=750)
    state = WorkingState(tmp_path, "p", config=config, tokenizer=TOK, clock=clock)
    state.set_goal("goal " * 300)
    state.set_now("now " * 300)
    p = state.project(40)
    assert p.tokens <= 40
    assert p.view["now"] == "" or p.view["now"].endswith("…")
    assert [(o.kind, o.reason) for o in p.omitted] == [("now", "truncated"), ("goal", "truncated")]


@pytest.mark.parametrize("budget", [249, 751, 300.0, True])
def test_budgets_outside_the_window_are_refused(state, budget):
    with pytest.raises(BudgetError, match=r"in \[250, 750\]"):
        state.project(budget)


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.text(min_size=1, max_size=80).filter(lambda s: s.strip()),
            st.sampled_from(["open", "in_progress", "blocked", "done", "dropped"]),
        ),
        max_size=30,
    ),
    st.integers(250, 750),
)
def test_any_state_projects_within_budget_and_round_trips(tmp_path_factory, tasks, budget):
    state = WorkingState(tmp_path_factory.mktemp("s"), "p", tokenizer=TOK, clock=Clock())
    doc = state.read()
    doc["tasks"] = [
        {"id": f"T-{i}", "title": t, "status": s, "updated_at": "2026-01-31T12:00:00Z"}
        for i, (t, s) in enumerate(tasks)
    ]
    state.replace(validate_state(doc))
    p = state.project(budget)
    assert p.tokens == TOK.count(p.text) <= budget
    back = toon_format.loads(p.text) if p.format == "toon" else json.loads(p.text)
    assert back == p.view
    assert len(p.view.get("tasks", [])) + len(p.omitted) == len(tasks)


def test_namespaces_have_separate_files(tmp_path, clock):
    a = WorkingState(tmp_path, "a", clock=clock)
    b = WorkingState(tmp_path, "b", clock=clock)
    a.set_goal("A's goal")
    assert b.read()["goal"] == "" and a.path != b.path
    with pytest.raises(ValidationError, match="invalid namespace"):
        WorkingState(tmp_path, "../escape")


def test_instruction_files_are_loaded_shared_first_with_token_counts(tmp_path):
    assert load_instructions(tmp_path, TOK) == ()
    (tmp_path / "STRATAMEM.local.md").write_text("Answer in French.", encoding="utf-8")
    (tmp_path / "STRATAMEM.md").write_text("# Rules\nRun pytest before committing.", encoding="utf-8")
    files = load_instructions(tmp_path, TOK)
    assert [(f.path.name, f.scope) for f in files] == [("STRATAMEM.md", "shared"), ("STRATAMEM.local.md", "local")]
    assert [f.tokens for f in files] == [
        TOK.count("# Rules\nRun pytest before committing."),
        TOK.count("Answer in French."),
    ]
    (tmp_path / "STRATAMEM.md").write_bytes(b"\xff\xfe bad")
    with pytest.raises(DecodeError, match="not UTF-8"):
        load_instructions(tmp_path, TOK)


def test_session_logs_append_and_rebuild_from_the_store(tmp_path, memory):
    logs = SessionLogs(tmp_path, memory.namespace)
    stored = memory.add(
        [{"role": "user", "content": "hi\u2028there"}, {"role": "assistant", "content": "hello"}], session="s1"
    )
    stored += memory.add({"role": "user", "content": "other"}, session="s2")
    assert logs.append(stored) == 3
    first = logs.read("s1")
    assert [(r["seq"], r["role"], r["content"]) for r in first] == [
        (1, "user", "hi\u2028there"),
        (2, "assistant", "hello"),
    ]
    logs.path("s1").unlink()
    logs.path("s2").write_text("garbage\n", encoding="utf-8")
    assert logs.rebuild(memory.store) == {"s1": 2, "s2": 1}
    assert logs.read("s1") == first
    assert logs.read("s2")[0]["id"] == stored[2].id
    assert logs.path("s1") == tmp_path / ".stratamem" / "sessions" / "test" / "s1.jsonl"
    with pytest.raises(NotFoundError):
        logs.read("s3")


def test_the_state_cli_updates_and_shows_the_state(tmp_path):
    from click.testing import CliRunner

    from stratamem.cli import main

    runner = CliRunner()
    base = ["--db", str(tmp_path / "m.db"), "-n", "proj", "state"]

    def run(*args: str) -> str:
        result = runner.invoke(
            main,
            [*base, *args[:1], *args[1:], "-C", str(tmp_path)]
            if args[0] != "task"
            else [*base, "task", args[1], *args[2:], "-C", str(tmp_path)],
        )
        assert result.exit_code == 0, result.output
        return result.output

    assert run("set", "goal", "Ship it") == "goal set\n"
    assert run("task", "add", "write docs") == "task T-1 added\n"
    assert run("task", "add", "write tests", "--status", "in_progress") == "task T-2 added\n"
    assert run("task", "done", "T-1") == "task T-1 is done\n"
    assert run("decide", "Use CTF", "--why", "tokens") == "decision D-1 recorded\n"
    assert run("convention", "language", "Python") == "convention language set\n"
    out = run("show")
    assert out.startswith(
        'goal: Ship it\nnow: ""\ntasks[2]{id,title,status}:\n  T-2,write tests,in_progress\n  T-1,write docs,done\n'
    )
    assert out.endswith(", toon; left out: nothing\n")
    bad = runner.invoke(main, [*base, "task", "update", "T-9", "--status", "done", "-C", str(tmp_path)])
    assert bad.exit_code == 1 and "NotFoundError: no task 'T-9'" in bad.output
    assert json_doc(tmp_path)["tasks"][0]["status"] == "done"


def json_doc(project) -> dict:
    return json.loads((project / ".stratamem" / "state" / "proj" / "state.json").read_text(encoding="utf-8"))


def test_memory_gives_the_state_of_its_namespace(tmp_path, memory):
    ws = memory.state(tmp_path)
    ws.set_goal("from the facade")
    assert ws.path == tmp_path / ".stratamem" / "state" / "test" / "state.json"
    assert WorkingState(tmp_path, "test").read()["goal"] == "from the facade"
