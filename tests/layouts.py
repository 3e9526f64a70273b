"""Earlier layouts of a store, rebuilt from the current one: what upgrade tests start from.

A test of an old migration writes rows through today's code, then puts the
tables back as they were before the later migrations and deletes their
records, so opening the store runs them all again in order.
"""

from __future__ import annotations

from typing import Any

from pg import raw_rows

PASSAGE_ROWS = "SELECT p.turn_id, m.model, p.vectors FROM recall_passages p JOIN recall_models m ON m.id = p.model_id"
"""Each passage row's turn id, model key and blob (the key by name, as it was stored before ``m028``)."""


def before_m028(store: Any) -> None:
    """``recall_passages`` with its model key on every row again, no ``recall_models``; ``m028`` unrecorded."""
    if store.backend == "sqlite":
        statements = [
            "CREATE TABLE p27 (namespace_id INTEGER NOT NULL REFERENCES namespaces(id), turn_id INTEGER NOT NULL, "
            "model TEXT NOT NULL, vectors BLOB NOT NULL, PRIMARY KEY (namespace_id, turn_id))",
            "INSERT INTO p27 SELECT p.namespace_id, p.turn_id, m.model, p.vectors FROM recall_passages p "
            "JOIN recall_models m ON m.id = p.model_id",
            "DROP TABLE recall_passages",
            "ALTER TABLE p27 RENAME TO recall_passages",
        ]
    else:
        statements = [
            "ALTER TABLE recall_passages ADD COLUMN model TEXT",
            "UPDATE recall_passages p SET model = m.model FROM recall_models m WHERE m.id = p.model_id",
            "ALTER TABLE recall_passages ALTER COLUMN model SET NOT NULL",
            "ALTER TABLE recall_passages DROP COLUMN model_id",
        ]
    for statement in [*statements, "DROP TABLE recall_models"]:
        raw_rows(store, statement)
    raw_rows(store, "DELETE FROM _stratamem_migrations WHERE name = 'm028_compact_rows'")
