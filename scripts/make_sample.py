"""Generate ``src/stratamem/data/sample_conversation.jsonl``, the demo conversation.

The story: Dana Okafor and a coding agent build the order service of Larkspur
Roasters, a small coffee webshop, over six sessions between 2 and 20 March
2026. Early sessions settle the database (SQLite first), the payment retry
policy and the naming conventions; a bug hunt follows; after an eleven-day gap
a load test forces a move to PostgreSQL and a new retry policy. The last
sessions never restate the early decisions, so a question such as "What did we
decide about the database and the retry policy?" can only be answered by
recalling turns from days before.

The dialogue, code and tool outputs are written here as data; this script only
adds what is mechanical: timestamps (from turn length and explicit pauses),
tool call ids (stable hashes), and the OpenAI Chat Completions shape (assistant
``tool_calls`` answered by ``tool`` messages). Each JSON Lines record carries
``session``, ``platform``, ``channel`` and ``timestamp`` beside the message.

Run from the repository root; the output is byte-for-byte reproducible::

    python scripts/make_sample.py            # rewrite the bundled file
    python scripts/make_sample.py --check    # exit 1 if the bundled file is stale
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

OUT = Path(__file__).resolve().parents[1] / "src" / "stratamem" / "data" / "sample_conversation.jsonl"
PLATFORM = "cli"
CHANNEL = "larkspur-orders"
SYSTEM_PROMPT = (
    "You are a coding agent working in the larkspur-orders repository with Dana Okafor. "
    "Tools: list_files, read_file, write_file, edit_file, run (shell, 120 s limit), search. "
    "Keep answers short, show the commands you ran, and ask before changing a decision."
)


class Session:
    """Builds the messages of one session with deterministic timestamps."""

    def __init__(self, name: str, start: str) -> None:
        self.name = name
        self.clock = datetime.fromisoformat(start).replace(tzinfo=timezone.utc)
        self.records: list[dict[str, Any]] = []
        self._calls = 0
        self._emit({"role": "system", "content": SYSTEM_PROMPT}, 0)

    def _emit(self, message: dict[str, Any], seconds: float) -> None:
        self.clock += timedelta(seconds=round(seconds))
        self.records.append({"session": self.name, "platform": PLATFORM, "channel": CHANNEL,
                             "timestamp": self.clock.strftime("%Y-%m-%dT%H:%M:%SZ"), **message})

    def pause(self, minutes: float) -> None:
        """Time passes without messages (a meeting, lunch, a long build)."""
        self.clock += timedelta(minutes=minutes)

    def user(self, text: str, name: str = "dana") -> None:
        """A human message; typing time grows with length."""
        # Reading the last reply and typing: longer messages take longer, up to 7 minutes.
        self._emit({"role": "user", "name": name, "content": text.strip()}, min(45 + len(text) / 2.5, 420))

    def bot(self, text: str) -> None:
        """An assistant reply."""
        self._emit({"role": "assistant", "content": text.strip()}, 6 + len(text) / 40)

    def tools(self, *calls: tuple[str, dict[str, Any], str], say: str | None = None, secs: float = 2) -> None:
        """One assistant message making ``calls`` (name, arguments, result), then their results."""
        ids = []
        for _ in calls:
            self._calls += 1
            digest = hashlib.sha256(f"{self.name}/{self._calls}".encode()).hexdigest()
            ids.append("call_" + digest[:24])
        message: dict[str, Any] = {"role": "assistant", "content": say.strip() if say else None,
                                   "tool_calls": [{"id": cid, "type": "function",
                                                   "function": {"name": name, "arguments": json.dumps(args)}}
                                                  for cid, (name, args, _) in zip(ids, calls)]}
        # Generating the arguments takes time too (a long file is written out in full).
        args_chars = sum(len(json.dumps(args)) for _, args, _ in calls)
        self._emit(message, 3 + (len(say) / 40 if say else 0) + args_chars / 150)
        for cid, (_, _, result) in zip(ids, calls):
            self._emit({"role": "tool", "tool_call_id": cid, "content": result.strip("\n")}, secs)

    def call(self, spec: tuple[str, dict[str, Any], str], say: str | None = None, secs: float = 2) -> None:
        """A single tool call built by one of the helpers below (:func:`read`, :func:`write` ...)."""
        self.tools(spec, say=say, secs=secs)

    def tool(self, name: str, args: dict[str, Any], result: str, say: str | None = None, secs: float = 2) -> None:
        """A single tool call and its result."""
        self.tools((name, args, result), say=say, secs=secs)


def read(path: str, text: str) -> tuple[str, dict[str, Any], str]:
    """A ``read_file`` call returning ``text``."""
    return ("read_file", {"path": path}, text)


def write(path: str, text: str) -> tuple[str, dict[str, Any], str]:
    """A ``write_file`` call; the tool answers with the byte count."""
    body = text.strip("\n") + "\n"
    return ("write_file", {"path": path, "content": body}, f"wrote {len(body.encode())} bytes to {path}")


def edit(path: str, old: str, new: str, result: str | None = None) -> tuple[str, dict[str, Any], str]:
    """An ``edit_file`` call replacing ``old`` with ``new``."""
    return ("edit_file", {"path": path, "old": old, "new": new}, result or f"edited {path}: 1 replacement")


def run(command: str, output: str) -> tuple[str, dict[str, Any], str]:
    """A ``run`` (shell) call."""
    return ("run", {"command": command}, output)


def search(pattern: str, path: str, output: str) -> tuple[str, dict[str, Any], str]:
    """A ``search`` (grep) call."""
    return ("search", {"pattern": pattern, "path": path}, output)


def build() -> list[dict[str, Any]]:
    """All records of the sample, in order."""
    records: list[dict[str, Any]] = []
    for make in SESSIONS:
        session = make()
        records.extend(session.records)
    return records


def render(records: list[dict[str, Any]]) -> str:
    """JSON Lines text of ``records`` (compact, UTF-8, one message a line)."""
    return "".join(json.dumps(r, ensure_ascii=False, separators=(",", ":")) + "\n" for r in records)


def main(argv: list[str] | None = None) -> int:
    """Write (or with ``--check`` verify) the bundled sample."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="verify the bundled file is up to date")
    parser.add_argument("--out", type=Path, default=OUT, help="output path")
    args = parser.parse_args(argv)
    text = render(build())
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python scripts/make_sample.py", file=sys.stderr)
            return 1
        print(f"{args.out} is up to date")
        return 0
    args.out.write_text(text, encoding="utf-8")
    print(f"wrote {text.count(chr(10))} messages to {args.out}")
    return 0


# --- the story ---------------------------------------------------------------------------
# Everything below is dialogue, code and tool output written for this sample.

PYPROJECT_V0 = '''
[project]
name = "larkspur-orders"
version = "0.0.1"
requires-python = ">=3.11"
dependencies = []

[tool.ruff]
line-length = 100
'''

SCHEMA_V1 = '''
-- Larkspur order service, schema v1 (SQLite, WAL).
-- Conventions: plural snake_case tables, money in integer cents (*_cents),
-- UTC ISO-8601 text timestamps (*_at), public ids "ord_" + 12 base32 chars.
PRAGMA foreign_keys = ON;

CREATE TABLE customers (
    id          INTEGER PRIMARY KEY,
    public_id   TEXT NOT NULL UNIQUE,          -- cus_xxxxxxxxxxxx
    email       TEXT NOT NULL UNIQUE,
    created_at  TEXT NOT NULL
);

CREATE TABLE products (
    id           INTEGER PRIMARY KEY,
    sku          TEXT NOT NULL UNIQUE,         -- e.g. ETH-YIRG-250
    name         TEXT NOT NULL,
    price_cents  INTEGER NOT NULL CHECK (price_cents >= 0),
    currency     TEXT NOT NULL DEFAULT 'EUR',
    stock        INTEGER NOT NULL CHECK (stock >= 0)
);

CREATE TABLE orders (
    id            INTEGER PRIMARY KEY,
    public_id     TEXT NOT NULL UNIQUE,        -- ord_xxxxxxxxxxxx
    customer_id   INTEGER NOT NULL REFERENCES customers(id),
    status        TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'failed', 'shipped', 'cancelled')),
    total_cents   INTEGER NOT NULL,
    currency      TEXT NOT NULL,
    created_at    TEXT NOT NULL,
    updated_at    TEXT NOT NULL
);

CREATE TABLE order_items (
    id                INTEGER PRIMARY KEY,
    order_id          INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    product_id        INTEGER NOT NULL REFERENCES products(id),
    quantity          INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents  INTEGER NOT NULL
);

CREATE TABLE stock_reservations (
    id          INTEGER PRIMARY KEY,
    order_id    INTEGER NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    product_id  INTEGER NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL,
    expires_at  TEXT NOT NULL
);

CREATE INDEX orders_customer_idx ON orders (customer_id, created_at);
CREATE INDEX stock_reservations_expiry_idx ON stock_reservations (expires_at);
'''

DB_PY_V1 = '''
"""Connections to the order database. Plain SQL, no ORM."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

SCHEMA = Path(__file__).with_name("schema.sql")


def connect(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA foreign_keys = ON")
    return conn


def init_db(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA.read_text())


@contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    conn.execute("BEGIN")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")
'''


def kickoff() -> Session:
    """Monday 2 March: scope, conventions, SQLite first, the schema."""
    s = Session("kickoff", "2026-03-02T09:12:00")
    s.user("""
Morning! New project. Larkspur Roasters (the coffee shop Tomás runs) wants their own order
service instead of the Shopify plugin that keeps double-selling the limited lots. I'm the only
dev on it for now. The repo is larkspur-orders, mostly empty. Can you look around first?
""")
    s.tool("list_files", {"path": "."}, """
.gitignore
README.md
pyproject.toml
orders/__init__.py
tests/__init__.py
docs/notes-from-tomas.md
""", say="Sure, let me see what's there.")
    s.tools(read("pyproject.toml", PYPROJECT_V0), read("docs/notes-from-tomas.md", """
# Notes from Tomás (call on 27 Feb)

- Weekly "Friday drop": a limited lot (60-200 bags) goes live at 12:00 CET every Friday.
  Last drop sold out in 9 minutes; Shopify oversold 14 bags and we had to refund people.
- Normal days: a few hundred orders per day. Drop: he guesses 250 orders per minute at peak.
- Payments stay with Paystream (Wei Zhang's team built the wrapper API for the shop).
- Warehouse is Northbeam Logistics (contact: Ines Duarte). They want to pull paid orders
  from us eventually; for now Tomás exports a CSV at 17:00.
- Budget: infra must stay under EUR 150 / month all in. Priya can host it.
- Launch target: Friday 20 March, ahead of the spring lot on the 27th.
"""))
    s.bot("""
Here's what I see: an empty `orders` package, a bare pyproject (Python 3.11, ruff at 100 columns),
and Tomás's notes. The core problem is overselling during the Friday drop: 60-200 bags,
about 250 orders a minute at peak, sold out in 9 minutes last time. So stock reservation has
to be atomic. Constraints: under EUR 150 a month for infra, Paystream for payments, Northbeam
for the warehouse, launch on Friday 20 March.

Before I write code I need a few things from you: which database, how you like the code
laid out, and your testing preferences.
""")
    s.user("""
Preferences first, they're easy. pytest, plain functions, no unittest classes. No ORMs,
I want to see every SQL statement in the code. SQLAlchemy Core is also out, just
sqlite3/psycopg directly. Type hints everywhere, ruff for lint and format. Keep modules small.
""")
    s.bot("""
Got it:
- tests: pytest, plain `test_*` functions, fixtures instead of setUp
- data access: handwritten SQL through the DB-API driver, no ORM and no SQLAlchemy Core
- type hints on everything, ruff for lint + format (line length 100 is already in pyproject)
- small modules, one concept each

I'll put these into `CONTRIBUTING.md` so they don't live only in this chat.
""")
    s.user("""
Good. Now the real question: database. Postgres or SQLite? Priya says she can give us a
Postgres but would rather not babysit one more thing. My gut says Postgres because that's
what 'real' services use.
""")
    s.bot("""
For what we know today I'd start with SQLite, and I'd write down exactly when we switch.

Why SQLite now:
1. One writer. There's one API process on one VM and nothing else writes. In WAL mode SQLite
   gives us readers that don't block plus one writer at a time, and our writes are
   millisecond transactions.
2. Load fits. 250 orders a minute is about 4 a second, and each checkout is a handful of
   small writes. SQLite on a local SSD handles thousands of those a second.
3. Operations and budget. No server to patch, back up or pay for. Backups are
   `sqlite3 orders.db ".backup ..."` on a timer. That matters with a EUR 150 cap, and
   Priya doesn't want another thing to babysit.
4. Tests are fast and real: every test gets a fresh database file in tmp_path.

When we switch to PostgreSQL: as soon as a second process has to write, for example a
Northbeam worker updating orders, or a second API replica behind a load balancer. SQLite only
lets one writer in at a time, and across hosts it can't work at all (no SQLite on a shared
network volume).

To keep the switch cheap: all SQL lives in one `repo` module behind plain functions, we avoid
SQLite-only features (no `INSERT OR REPLACE`, no loosely typed columns), and we store money as
integer cents and timestamps in UTC.
""")
    s.user("""
Ok, convinced. SQLite (WAL) for launch, Postgres the day a second writer shows up. Write that
down as a decision record, with the reasons, so future-me doesn't relitigate it.
""")
    s.call(write("docs/decisions/0001-sqlite-first.md", """# ADR 0001: SQLite (WAL) first, PostgreSQL when a second writer appears

Date: 2026-03-02. Status: accepted. Deciders: Dana Okafor (with the coding agent).

## Context
One API process on one VM; ~250 orders/min at the Friday-drop peak; infra budget EUR 150/month;
Priya Raman would rather not operate another server.

## Decision
Use SQLite in WAL mode, one database file on the VM's local disk.

## Reasons
- a single writer process; WAL gives concurrent readers and short write transactions
- load is ~4 checkouts/s at peak, far below what SQLite on local SSD sustains
- no server to run, patch or pay for; backups with `.backup` on a timer
- tests run on real database files in tmp_path

## Revisit when
A second process must write (a Northbeam fulfillment worker, or a second API replica).
Then move to PostgreSQL. SQLite must never sit on a shared network volume.

## Keeping the move cheap
All SQL in `orders/repo.py`; no ORM; no SQLite-only SQL; money as integer cents;
UTC timestamps.
"""))
    s.bot("Written to `docs/decisions/0001-sqlite-first.md`, with the revisit trigger spelled out.")
    s.user("""
Naming conventions next. I've been burned by a codebase where half the tables were singular
and money was floats. Propose something.
""")
    s.bot("""
Proposal:
- **tables**: plural snake_case: `orders`, `order_items`, `customers`, `products`,
  `stock_reservations`. Primary key is always `id INTEGER`; foreign keys are `<singular>_id`.
- **public ids**: never expose row ids. Orders get `ord_` + 12 lowercase base32 chars
  (`ord_7k2m9xq4bz1t`), customers `cus_...`. Prefixes make log lines self-explanatory.
- **money**: integer cents, column suffix `_cents` (`total_cents`, `unit_price_cents`), plus an
  ISO 4217 `currency` column. No floats anywhere near money.
- **time**: UTC ISO-8601, columns end in `_at` (`created_at`, `expires_at`).
- **modules**: `orders/<noun>.py` (`repo.py`, `payments.py`, `checkout.py`); repo functions are
  `verb_noun`: `create_order`, `reserve_stock`, `mark_paid`.
- **tests**: `tests/test_<module>.py`, test names read as sentences:
  `test_reserve_stock_refuses_more_than_available`.
- **config**: environment variables prefixed `LARKSPUR_` (`LARKSPUR_DB_PATH`).
- **errors**: one base `OrderError`; codes `ORD-1xx` validation, `ORD-2xx` stock,
  `ORD-3xx` payment, returned in API error bodies.
""")
    s.user("""
Love the prefixed ids. One change: SKUs are uppercase with dashes, the roasters already print
them on the bags, e.g. ETH-YIRG-250 for the 250 g Yirgacheffe. Keep those as they are.
Everything else, yes.
""")
    s.bot("""
Noted: SKUs keep the roastery's existing format, uppercase with dashes (`ETH-YIRG-250`), stored
verbatim in `products.sku`. I'll write the conventions into CONTRIBUTING.md together with your
testing and no-ORM preferences.
""")
    s.call(write("CONTRIBUTING.md", """# Contributing to larkspur-orders

## Code
- Python 3.11, type hints everywhere, `ruff check` and `ruff format` (line length 100).
- No ORMs, not even SQLAlchemy Core: handwritten SQL through sqlite3 (later psycopg).
- Small modules, one concept each: `orders/<noun>.py`.

## Tests
- pytest only, plain functions, fixtures; no unittest classes.
- Real database files in `tmp_path`; no mocking the database.
- Names read as sentences: `test_reserve_stock_refuses_more_than_available`.

## Naming
- Tables plural snake_case; `id` primary keys; `<singular>_id` foreign keys.
- Public ids: `ord_` / `cus_` + 12 lowercase base32 characters. Never expose row ids.
- Money: integer cents, `_cents` suffix, plus an ISO 4217 `currency` column.
- Time: UTC ISO-8601, `_at` suffix.
- SKUs: the roastery's own uppercase-dash codes, verbatim (ETH-YIRG-250).
- Config: `LARKSPUR_*` environment variables.
- Errors: `OrderError` base; ORD-1xx validation, ORD-2xx stock, ORD-3xx payment.
"""))
    s.user("Now the schema please. Customers, products, orders, items, and something for stock holds.")
    s.tools(write("orders/schema.sql", SCHEMA_V1), write("orders/db.py", DB_PY_V1),
            say="Writing the schema and a small connection module.")
    s.bot("""
Schema v1 is in `orders/schema.sql`:
- `products.stock` has a `CHECK (stock >= 0)`, so the database itself refuses to oversell, even
  if the application logic has a bug.
- `stock_reservations` holds stock for an order while payment is in flight; each row has an
  `expires_at` so abandoned checkouts give their stock back.
- `orders.status` is one of pending / paid / failed / shipped / cancelled.

`orders/db.py` opens connections in WAL mode with foreign keys on and has a `transaction()`
context manager. Want a smoke test before lunch?
""")
    s.user("yes, and add pytest to the dev deps")
    s.tools(edit("pyproject.toml", "dependencies = []", 'dependencies = []\n\n[project.optional-dependencies]\ndev = ["pytest==8.3.4", "ruff==0.9.7"]'),
            write("tests/test_db.py", '''
from orders import db


def test_schema_creates_all_tables(tmp_path):
    conn = db.connect(str(tmp_path / "orders.db"))
    db.init_db(conn)
    names = {r["name"] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert names == {"customers", "products", "orders", "order_items", "stock_reservations"}


def test_stock_cannot_go_negative(tmp_path):
    conn = db.connect(str(tmp_path / "orders.db"))
    db.init_db(conn)
    conn.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES ('ETH-YIRG-250', 'Yirgacheffe 250 g', 1450, 1)")
    try:
        conn.execute("UPDATE products SET stock = stock - 2 WHERE sku = 'ETH-YIRG-250'")
    except Exception as exc:
        assert "CHECK constraint failed" in str(exc)
    else:
        raise AssertionError("stock went negative")
'''))
    s.tool("run", {"command": "pip install -e '.[dev]' -q && pytest -q"}, """
..                                                                       [100%]
2 passed in 0.08s
""", secs=19)
    s.bot("Both pass: all five tables get created, and the CHECK constraint stops stock from going negative.")
    s.user("""
Nice. Budget detail so you have it: Priya says the VM is EUR 24/month (4 vCPU, 8 GB, local NVMe)
and backups to object storage are about EUR 3. So we're at ~EUR 27 of the 150. Off to lunch,
back at 2.
""")
    s.bot("""
Noted: VM EUR 24/month (4 vCPU, 8 GB, local NVMe) plus about EUR 3 for backups, so roughly
EUR 27 of the EUR 150 monthly cap. The local NVMe is also where SQLite should live.
Enjoy lunch.
""")
    s.pause(68)
    s.user("""
Back. Let's do the stock reservation logic: reserve on checkout start, release when it
expires after 10 minutes, convert to a sale when payment succeeds.
""")
    s.bot("""
Plan for `orders/repo.py`:
- `reserve_stock(conn, order_id, items, ttl=timedelta(minutes=10))`: in one transaction,
  decrement `products.stock` and insert reservation rows. If the CHECK fails, raise
  `OutOfStock` (ORD-201) naming the SKU.
- `release_expired(conn, now)`: put the stock back for expired reservations and delete them.
- `confirm_reservation(conn, order_id)`: delete the reservation rows, since the stock is
  already decremented. That's the sale.

Decrementing up front means two customers can never hold the last bag at the same time:
the database refuses the second one.
""")
    s.user("Do it. And the checkout flow can come after the payment client exists, so stop at the repo.")
    s.call(write("orders/repo.py", '''"""All SQL of the order service lives here."""

from __future__ import annotations

import secrets
import sqlite3
from datetime import datetime, timedelta, timezone

from .errors import OutOfStock

_B32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_public_id(prefix: str) -> str:
    return prefix + "_" + "".join(secrets.choice(_B32) for _ in range(12))


def _now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


def create_order(conn: sqlite3.Connection, customer_id: int, items: list[tuple[int, int, int]],
                 currency: str = "EUR") -> tuple[int, str]:
    public_id = new_public_id("ord")
    total = sum(qty * price for _, qty, price in items)
    cur = conn.execute(
        "INSERT INTO orders (public_id, customer_id, status, total_cents, currency, created_at, updated_at)"
        " VALUES (?, ?, 'pending', ?, ?, ?, ?)",
        (public_id, customer_id, total, currency, _now(), _now()),
    )
    order_id = cur.lastrowid
    conn.executemany(
        "INSERT INTO order_items (order_id, product_id, quantity, unit_price_cents) VALUES (?, ?, ?, ?)",
        [(order_id, pid, qty, price) for pid, qty, price in items],
    )
    return order_id, public_id


def reserve_stock(conn: sqlite3.Connection, order_id: int, items: list[tuple[int, int]],
                  ttl: timedelta = timedelta(minutes=10)) -> None:
    expires = (datetime.now(timezone.utc) + ttl).isoformat(timespec="seconds")
    for product_id, qty in items:
        row = conn.execute("SELECT sku, stock FROM products WHERE id = ?", (product_id,)).fetchone()
        if row["stock"] < qty:
            raise OutOfStock(row["sku"], wanted=qty, available=row["stock"])
        conn.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (qty, product_id))
        conn.execute(
            "INSERT INTO stock_reservations (order_id, product_id, quantity, expires_at) VALUES (?, ?, ?, ?)",
            (order_id, product_id, qty, expires),
        )


def release_expired(conn: sqlite3.Connection, now: str | None = None) -> int:
    now = now or _now()
    rows = conn.execute("SELECT id, product_id, quantity FROM stock_reservations WHERE expires_at <= ?",
                        (now,)).fetchall()
    for r in rows:
        conn.execute("UPDATE products SET stock = stock + ? WHERE id = ?", (r["quantity"], r["product_id"]))
        conn.execute("DELETE FROM stock_reservations WHERE id = ?", (r["id"],))
    return len(rows)


def confirm_reservation(conn: sqlite3.Connection, order_id: int) -> None:
    conn.execute("DELETE FROM stock_reservations WHERE order_id = ?", (order_id,))
'''))
    s.tools(write("orders/errors.py", '''
"""Errors of the order service; codes ORD-1xx validation, ORD-2xx stock, ORD-3xx payment."""


class OrderError(Exception):
    code = "ORD-100"


class OutOfStock(OrderError):
    code = "ORD-201"

    def __init__(self, sku: str, wanted: int, available: int) -> None:
        super().__init__(f"{sku}: wanted {wanted}, {available} available")
        self.sku, self.wanted, self.available = sku, wanted, available


class PaymentFailed(OrderError):
    code = "ORD-301"
'''), write("tests/test_repo.py", '''
from datetime import timedelta

import pytest

from orders import db, repo
from orders.errors import OutOfStock


@pytest.fixture
def conn(tmp_path):
    c = db.connect(str(tmp_path / "orders.db"))
    db.init_db(c)
    c.execute("INSERT INTO customers (public_id, email, created_at) VALUES ('cus_aaaaaaaaaaaa', 'a@example.com', '2026-03-02T12:00:00+00:00')")
    c.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES ('ETH-YIRG-250', 'Yirgacheffe 250 g', 1450, 3)")
    return c


def test_reserve_stock_decrements_stock(conn):
    order_id, _ = repo.create_order(conn, 1, [(1, 2, 1450)])
    repo.reserve_stock(conn, order_id, [(1, 2)])
    assert conn.execute("SELECT stock FROM products").fetchone()[0] == 1


def test_reserve_stock_refuses_more_than_available(conn):
    order_id, _ = repo.create_order(conn, 1, [(1, 4, 1450)])
    with pytest.raises(OutOfStock) as info:
        repo.reserve_stock(conn, order_id, [(1, 4)])
    assert (info.value.sku, info.value.available) == ("ETH-YIRG-250", 3)


def test_release_expired_returns_stock(conn):
    order_id, _ = repo.create_order(conn, 1, [(1, 2, 1450)])
    repo.reserve_stock(conn, order_id, [(1, 2)], ttl=timedelta(seconds=-1))
    assert repo.release_expired(conn) == 1
    assert conn.execute("SELECT stock FROM products").fetchone()[0] == 3
'''))
    s.tool("run", {"command": "pytest -q"}, """
.....                                                                    [100%]
5 passed in 0.11s
""", secs=3)
    s.bot("""
5 passed. `orders/repo.py` now has `create_order`, `reserve_stock`, `release_expired` and
`confirm_reservation`; `orders/errors.py` has `OrderError`, `OutOfStock` (ORD-201) and
`PaymentFailed` (ORD-301).

One caveat for later: `reserve_stock` reads the stock and then updates it. Inside a single
transaction that's fine for one writer, but I'll revisit it when we add concurrency tests.
""")
    s.user("""
Fine for today. Tomorrow: the Paystream client. Wei said their sandbox is flaky so we'll need
retries. Thanks, good first day.
""")
    s.bot("""
Thanks. Summary of today:
- decision: SQLite in WAL mode for launch (ADR 0001); PostgreSQL when a second writer appears
- conventions and preferences in CONTRIBUTING.md (pytest, no ORMs, `_cents`, `_at`, `ord_` ids)
- schema v1, connection helper and stock reservation functions, 5 tests green
Tomorrow: the Paystream client and its retry policy.
""")
    return s


PAYSTREAM_DOC = '''
# Paystream shop API (internal wrapper, v2) - maintained by Wei Zhang's team

Base URL (sandbox): https://sandbox.paystream.internal/v2
Base URL (live):    https://api.paystream.internal/v2
Auth: header `Authorization: Bearer <token>`; token in the vault at shop/larkspur/paystream.

## POST /charges
Body: {"amount_cents": int, "currency": "EUR", "customer_ref": str, "description": str,
       "payment_method": str}
Headers: `Idempotency-Key` (optional, strongly recommended): up to 64 chars.
  A repeated key within 24 h returns the ORIGINAL response (same charge id, same status)
  and never charges twice. Reusing a key with a different body -> 422 idempotency_mismatch.

Responses
  201  {"id": "ch_...", "status": "succeeded" | "requires_action" | "declined", ...}
  400  validation_error          (do not retry)
  401  unauthorized              (do not retry)
  402  card_declined             (do not retry; show message to customer)
  409  charge_in_progress        (same key still processing; retry after a short wait)
  422  idempotency_mismatch      (do not retry; bug on our side)
  429  rate_limited              (Retry-After header, seconds)
  500  internal_error            (may have charged! retry only with the same Idempotency-Key)
  502/503/504                    (gateway; safe to retry with the same Idempotency-Key)

Timeouts: p99 latency is 900 ms in live, the sandbox is slower and drops ~5 % of requests
(known; they restart it nightly at 02:00 UTC).

## GET /charges/{id}
Returns the charge. Use it to reconcile after a timeout.
'''

RETRY_PY_V1 = '''
"""Retry with exponential backoff and full jitter, for idempotent calls only."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 3            # total tries, the first one included
    base_delay: float = 0.200    # seconds; delay before retry n is uniform(0, base * 2**n)
    max_delay: float = 2.0       # cap on a single delay
    deadline: float = 6.0        # give up when the next try would start later than this

    def delay(self, retry: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** retry))


class RetryableError(Exception):
    """Raised by a call that may be tried again with the same idempotency key."""


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, *, rng: random.Random | None = None,
                    sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> T:
    rng = rng or random.Random()
    start = clock()
    for attempt in range(policy.attempts):
        try:
            return fn()
        except RetryableError:
            if attempt == policy.attempts - 1:
                raise
            pause = policy.delay(attempt, rng)
            if clock() - start + pause > policy.deadline:
                raise
            sleep(pause)
    raise AssertionError("unreachable")
'''

PAYMENTS_PY_V1 = '''
"""Paystream client: one charge call, retried per RetryPolicy with a stable idempotency key."""

from __future__ import annotations

import httpx

from .errors import PaymentFailed
from .retry import RetryableError, RetryPolicy, call_with_retry

RETRYABLE_STATUS = {409, 500, 502, 503, 504}


class PaymentsClient:
    def __init__(self, base_url: str, token: str, policy: RetryPolicy = RetryPolicy(),
                 timeout: float = 2.5) -> None:
        self._http = httpx.Client(base_url=base_url, timeout=timeout,
                                  headers={"Authorization": f"Bearer {token}"})
        self.policy = policy

    def charge(self, order_public_id: str, amount_cents: int, currency: str, payment_method: str) -> dict:
        key = f"charge-{order_public_id}"

        def once() -> dict:
            try:
                r = self._http.post("/charges", headers={"Idempotency-Key": key}, json={
                    "amount_cents": amount_cents, "currency": currency,
                    "customer_ref": order_public_id, "description": f"Larkspur order {order_public_id}",
                    "payment_method": payment_method})
            except (httpx.ConnectError, httpx.TimeoutException) as exc:
                raise RetryableError(str(exc)) from exc
            if r.status_code in RETRYABLE_STATUS:
                raise RetryableError(f"paystream {r.status_code}")
            if r.status_code >= 400:
                raise PaymentFailed(f"paystream {r.status_code}: {r.json().get('error')}")
            return r.json()

        return call_with_retry(once, self.policy)
'''


def payments() -> Session:
    """Tuesday 3 March: the Paystream client and the first retry policy."""
    s = Session("payments-retry", "2026-03-03T14:05:00")
    s.user("""
Afternoon. Paystream client today. Wei sent me their API doc, it's in docs/paystream-api.md.
Their sandbox drops requests now and then so we need a proper retry policy. Read it and
propose one?
""")
    s.call(read("docs/paystream-api.md", PAYSTREAM_DOC))
    s.bot("""
Three things in that doc decide the design:
1. **Idempotency-Key**: a repeated key within 24 h returns the original response and never
   charges twice. That's what makes retries safe.
2. **500 may have charged.** So we may retry a 500 only with the same key, never with a new one.
3. The **sandbox drops about 5 %** of requests and restarts nightly at 02:00 UTC; live p99
   latency is 900 ms.

Proposed retry policy for `POST /charges`:
- **3 attempts in total** (the first plus 2 retries)
- **exponential backoff, base 200 ms, factor 2, full jitter**: before retry n we sleep a
  random time between 0 and 200 ms × 2^n, so up to 200 ms, then up to 400 ms
- cap of 2 s on any single delay, overall deadline 6 s, per-attempt timeout 2.5 s
- retry on connect errors, timeouts, 409 charge_in_progress, 500, 502, 503, 504
- never retry 400, 401, 402, 422: those are answers, not glitches
- idempotency key = `charge-<order public id>`, e.g. `charge-ord_7k2m9xq4bz1t`: stable across
  retries and across process restarts

Full jitter rather than fixed delays keeps a burst of failed checkouts from retrying in lockstep
during the Friday drop.
""")
    s.user("""
Why full jitter and not 'equal jitter' or whatever? And 3 attempts feels low.
""")
    s.bot("""
Full jitter (sleep uniform(0, base·2^n)) spreads retries out the most, so the provider sees
the least synchronized load, at the price of sometimes retrying almost at once. Equal jitter
(half fixed, half random) guarantees a minimum wait, which we don't need: a dropped sandbox
request can be retried right away.

On 3 attempts: a checkout is a person looking at a spinner. With a 2.5 s per-attempt timeout,
3 attempts plus backoff already come to about 8 s in the worst case, and the 6 s deadline
cuts that short. If the sandbox loses 5 % of requests independently, 3 attempts fail only
0.05³ ≈ 0.0125 % of the time. More attempts mostly add waiting when Paystream is really down,
and then we'd rather tell the customer quickly and let them try again.
""")
    s.user("""
Ok that makes sense. Go with it: 3 attempts, 200 ms base, full jitter, 2 s cap, 6 s deadline.
Write it as ADR 0002 too. Also Wei confirmed on Slack that the 24h idempotency window is real,
they dedupe in Redis keyed by (merchant, key).
""")
    s.tools(write("docs/decisions/0002-payment-retry-policy.md", """
# ADR 0002: Retry policy for Paystream charges

Date: 2026-03-03. Status: accepted. Deciders: Dana Okafor; confirmed with Wei Zhang (Paystream).

- 3 attempts in total; exponential backoff with base 200 ms and factor 2; full jitter
  (sleep uniform(0, 0.2 s * 2^n)); single delay capped at 2 s; overall deadline 6 s;
  per-attempt timeout 2.5 s.
- Retry on connect errors, timeouts, 409, 500, 502, 503, 504. Never on 400/401/402/422.
- Idempotency-Key `charge-<order public id>`: stable across retries and restarts. Paystream
  deduplicates keys for 24 h (confirmed by Wei Zhang: Redis, keyed by merchant and key).
- A 500 may have charged: retry only with the same key; reconcile with GET /charges/{id}.

Why full jitter: spreads retries of a failing burst (Friday drop) the most.
Why 3: worst case stays under ~6 s for a customer waiting on a spinner; 0.05^3 residual
failure rate against the sandbox's 5 % drop rate.
"""), write("orders/retry.py", RETRY_PY_V1), write("orders/payments.py", PAYMENTS_PY_V1),
            say="Writing the ADR, the retry helper and the client.")
    s.user("""
Looks right. Tests: I don't want real sleeps in the test suite, and I don't want to mock
httpx either. Can we run a tiny fake Paystream server in the test?
""")
    s.bot("""
Yes, two layers:
- `call_with_retry` takes `sleep`, `clock` and `rng` as parameters, so its unit tests pass a
  recording `sleep` and a seeded `random.Random`, and no real time passes.
- For the client, a real HTTP server on 127.0.0.1 in a thread (stdlib `http.server`) that
  replays a script of responses, e.g. [503, 503, 201], and records the Idempotency-Key of every
  request. Real httpx, real sockets, no mocks. The client's policy gets base_delay=0 in those
  tests.
""")
    s.call(write("tests/test_retry.py", '''
import random

import pytest

from orders.retry import RetryableError, RetryPolicy, call_with_retry


def flaky(failures):
    calls = []

    def fn():
        calls.append(1)
        if len(calls) <= failures:
            raise RetryableError("boom")
        return "ok"

    return fn, calls


def test_succeeds_on_third_attempt_after_two_sleeps():
    fn, calls = flaky(2)
    sleeps = []
    assert call_with_retry(fn, RetryPolicy(), rng=random.Random(7), sleep=sleeps.append) == "ok"
    assert len(calls) == 3 and len(sleeps) == 2


def test_gives_up_after_three_attempts():
    fn, calls = flaky(5)
    with pytest.raises(RetryableError):
        call_with_retry(fn, RetryPolicy(), rng=random.Random(7), sleep=lambda s: None)
    assert len(calls) == 3


def test_delays_stay_within_full_jitter_bounds():
    policy = RetryPolicy()
    rng = random.Random(1)
    for n in range(6):
        for _ in range(200):
            assert 0 <= policy.delay(n, rng) <= min(2.0, 0.2 * 2 ** n)
'''))
    s.call(write("tests/test_payments.py", '''
import json
import threading
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest

from orders.errors import PaymentFailed
from orders.payments import PaymentsClient
from orders.retry import RetryableError, RetryPolicy


@pytest.fixture
def paystream():
    script, seen = [], []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers["Content-Length"]))
            seen.append((self.headers["Idempotency-Key"], json.loads(body)))
            status = script.pop(0)
            payload = {"id": "ch_test", "status": "succeeded"} if status == 201 else {"error": "x"}
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_port}", script, seen
    server.shutdown()


def client(url):
    return PaymentsClient(url, "test-token", RetryPolicy(base_delay=0))


def test_retries_503_with_the_same_idempotency_key(paystream):
    url, script, seen = paystream
    script.extend([503, 503, 201])
    assert client(url).charge("ord_aaaaaaaaaaaa", 1450, "EUR", "pm_card")["status"] == "succeeded"
    assert [key for key, _ in seen] == ["charge-ord_aaaaaaaaaaaa"] * 3


def test_card_declined_is_not_retried(paystream):
    url, script, seen = paystream
    script.extend([402])
    with pytest.raises(PaymentFailed):
        client(url).charge("ord_aaaaaaaaaaaa", 1450, "EUR", "pm_card")
    assert len(seen) == 1


def test_three_503s_give_up(paystream):
    url, script, seen = paystream
    script.extend([503, 503, 503])
    with pytest.raises(RetryableError):
        client(url).charge("ord_aaaaaaaaaaaa", 1450, "EUR", "pm_card")
    assert len(seen) == 3
'''))
    s.tool("run", {"command": "pytest -q"}, """
....F.....F                                                              [100%]
=================================== FAILURES ===================================
___________________ test_card_declined_is_not_retried _________________________

paystream = ('http://127.0.0.1:41873', [], [('charge-ord_aaaaaaaaaaaa', {...})])

    def test_card_declined_is_not_retried(paystream):
        url, script, seen = paystream
        script.extend([402])
        with pytest.raises(PaymentFailed):
>           client(url).charge("ord_aaaaaaaaaaaa", 1450, "EUR", "pm_card")

tests/test_payments.py:52:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
orders/payments.py:35: in once
    raise PaymentFailed(f"paystream {r.status_code}: {r.json().get('error')}")
orders/errors.py:22: in __init__
    super().__init__(f"{sku}: wanted {wanted}, {available} available")
E   TypeError: OutOfStock.__init__() missing 2 required positional arguments: 'wanted' and 'available'
___________________ test_delays_stay_within_full_jitter_bounds ________________

    def test_delays_stay_within_full_jitter_bounds():
        policy = RetryPolicy()
        rng = random.Random(1)
        for n in range(6):
            for _ in range(200):
>               assert 0 <= policy.delay(n, rng) <= min(2.0, 0.2 * 2 ** n)
E               assert 0.40000000000000013 <= 0.4
E                +  where 0.40000000000000013 = delay(1, <random.Random object at 0x7f3a2c1e5d50>)

tests/test_retry.py:34: AssertionError
=========================== short test summary info ============================
FAILED tests/test_payments.py::test_card_declined_is_not_retried - TypeError: OutOfStock.__init__() missing 2 required positional arguments
FAILED tests/test_retry.py::test_delays_stay_within_full_jitter_bounds - assert 0.40000000000000013 <= 0.4
2 failed, 9 passed in 0.64s
""", secs=4)
    s.bot("""
Two failures, both mine:
1. The `PaymentFailed` traceback runs into `OutOfStock.__init__`. I pasted `errors.py` with
   `PaymentFailed` indented under `OutOfStock` in my working copy, so it inherited the wrong
   constructor. Let me check the file.
2. Float rounding: 0.2 × 2¹ gives 0.40000000000000013 with `base * 2 ** retry`. The test's
   bound is fine; the delay should be computed so the bound holds exactly. I'll clamp with
   `min(cap, base * 2**n)` in the test too, using the same expression, rather than loosen it.
""")
    s.call(read("orders/errors.py", '''
"""Errors of the order service; codes ORD-1xx validation, ORD-2xx stock, ORD-3xx payment."""


class OrderError(Exception):
    code = "ORD-100"


class OutOfStock(OrderError):
    code = "ORD-201"

    def __init__(self, sku: str, wanted: int, available: int) -> None:
        super().__init__(f"{sku}: wanted {wanted}, {available} available")
        self.sku, self.wanted, self.available = sku, wanted, available


class PaymentFailed(OutOfStock):
    code = "ORD-301"
'''))
    s.tools(edit("orders/errors.py", "class PaymentFailed(OutOfStock):", "class PaymentFailed(OrderError):"),
            edit("tests/test_retry.py", "<= min(2.0, 0.2 * 2 ** n)", "<= min(policy.max_delay, policy.base_delay * 2 ** n)"),
            say="There it is: `class PaymentFailed(OutOfStock)`. Fixing both.")
    s.tool("run", {"command": "pytest -q"}, """
...........                                                              [100%]
11 passed in 0.58s
""", secs=3)
    s.bot("11 passed. The fake Paystream sees the same key `charge-ord_aaaaaaaaaaaa` on all three tries, and a 402 is tried exactly once.")
    s.pause(9)
    s.user("""
Wei just pinged: for the 500 case, he'd like us to reconcile with GET /charges/{id} before
telling the customer it failed, but we don't have the charge id if the POST died. Thoughts?
""")
    s.bot("""
Right: after a 500 or a timeout on the last attempt we have no charge id. Two options:
1. Ask Paystream to look up by Idempotency-Key (`GET /charges?idempotency_key=...`). That
   would be the clean fix, but the doc doesn't list it.
2. Send the same POST again later with the same key. Within 24 h it returns the original
   outcome without charging again, so it works as a lookup.

I'd do option 2 in a small reconcile job: orders left in `pending` with a charge attempt older
than 2 minutes get the same POST again. The customer sees "we're confirming your payment"
instead of an error. Shall I ask Wei whether option 1 exists?
""")
    s.user("""
Option 2, and don't bother Wei, his team is swamped before the drop. Put a TODO with his name
though so we remember to ask after launch.
""")
    s.call(edit("orders/payments.py", '        return call_with_retry(once, self.policy)',
                '        # TODO(after launch): ask Wei Zhang whether Paystream can look up a charge by\n'
                '        # Idempotency-Key; until then reconcile by re-POSTing with the same key.\n'
                '        return call_with_retry(once, self.policy)'))
    s.user("""
Also, where does the token come from? Priya wants everything secret in the vault, nothing
in env files on the box.
""")
    s.bot("""
`PaymentsClient` takes the token as an argument, so the caller decides where it comes from.
At startup the app will read it from the vault path `shop/larkspur/paystream` (from Wei's doc)
through Priya's vault agent, which writes it to a tmpfs file. The config only has the file
path: `LARKSPUR_PAYSTREAM_TOKEN_FILE=/run/secrets/paystream`. No secret ends up in an env
file or in the repo.
""")
    s.user("good. checkout flow tomorrow? I have a dentist thing Wednesday, so Thursday then.")
    s.bot("""
Thursday it is. Status:
- ADR 0002: 3 attempts, 200 ms base, ×2, full jitter, 2 s cap, 6 s deadline, 2.5 s
  per-attempt timeout, key `charge-<order id>`
- `orders/retry.py`, `orders/payments.py`, 11 tests green (real HTTP server, no mocks)
- reconcile plan for pending charges (re-POST with the same key); TODO to ask Wei after launch
Next: `checkout()` wiring reserve → charge → confirm, plus a concurrency test for the drop.
""")
    return s


CHECKOUT_PY = '''
"""Checkout: reserve stock, create the order, charge, confirm. Plain functions over a connection."""

from __future__ import annotations

import sqlite3
import sys
import threading

from . import db, repo
from .errors import PaymentFailed
from .payments import PaymentsClient
from .retry import RetryableError, RetryPolicy, call_with_retry


def _retry_checkout(fn):
    # Dana, 4 Mar late: the sandbox dropped a checkout during my manual test;
    # retry the whole thing so a flaky network does not fail the customer.
    def wrapper(*args, **kwargs):
        attempt = 0

        def once():
            nonlocal attempt
            attempt += 1
            try:
                return fn(*args, **kwargs)
            except Exception as exc:
                print(f"{threading.current_thread().name}: checkout attempt {attempt}/3 failed: "
                      f"{type(exc).__name__}: {exc}", file=sys.stderr)
                raise RetryableError(str(exc)) from exc
        return call_with_retry(once, RetryPolicy())
    return wrapper


@_retry_checkout
def checkout(conn: sqlite3.Connection, payments: PaymentsClient, customer_id: int,
             cart: list[tuple[int, int, int]], payment_method: str) -> str:
    with db.transaction(conn):
        order_id, public_id = repo.create_order(conn, customer_id, cart)
        repo.reserve_stock(conn, order_id, [(pid, qty) for pid, qty, _ in cart])
    total = sum(qty * price for _, qty, price in cart)
    try:
        payments.charge(public_id, total, "EUR", payment_method)
    except (PaymentFailed, RetryableError):
        with db.transaction(conn):
            repo.release_order(conn, order_id)
        raise
    with db.transaction(conn):
        repo.confirm_reservation(conn, order_id)
        repo.mark_paid(conn, order_id)
    return public_id
'''

CONCURRENCY_LOG = '''
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0 -- /home/dana/larkspur-orders/.venv/bin/python
rootdir: /home/dana/larkspur-orders
configfile: pyproject.toml
collecting ... collected 1 item

tests/test_checkout.py::test_drop_never_oversells_or_double_charges FAILED [100%]

=================================== FAILURES ===================================
_________________ test_drop_never_oversells_or_double_charges __________________

tmp_path = PosixPath('/tmp/pytest-of-dana/pytest-41/test_drop_never_oversells_or_d0')
paystream = ('http://127.0.0.1:39211', <Script always=201>, <Seen 5 requests>)

    def test_drop_never_oversells_or_double_charges(tmp_path, paystream):
        url, script, seen = paystream
        path = str(tmp_path / "orders.db")
        setup_shop(path, sku="KEN-NYERI-250", stock=5, customers=20)
        results = run_buyers(path, url, buyers=20, qty=1)
        charges = Counter(body["payment_method"] for _, body in seen)
>       assert max(charges.values()) == 1, "a buyer was charged twice"
E       AssertionError: a buyer was charged twice
E       assert 2 == 1
E        +  where 2 = max(dict_values([1, 1, 2, 1]))
E        +    where dict_values([1, 1, 2, 1]) = Counter({'pm_buyer_01': 2, 'pm_buyer_03': 1, 'pm_buyer_11': 1, 'pm_buyer_14': 1}).values()

tests/test_checkout.py:44: AssertionError
----------------------------- Captured stderr call -----------------------------
buyer 03: ord_2xq7bdm4kz6p paid
buyer 07: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 11: ord_5tjw3r2nq8ha paid
buyer 01: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 14: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 07: checkout attempt 2/3 failed: OperationalError: database is locked
buyer 02: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 01: checkout attempt 2/3 failed: OperationalError: database is locked
buyer 19: checkout attempt 1/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 05: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 14: ord_b7kd2zp6xqa4 paid
buyer 09: checkout attempt 1/3 failed: OperationalError: database is locked
buyer 07: checkout attempt 3/3 failed: OperationalError: database is locked
buyer 07: error: RetryableError
buyer 01: ord_h4kq8w2mz7rb paid
buyer 02: checkout attempt 2/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 19: checkout attempt 2/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 05: checkout attempt 2/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 12: checkout attempt 1/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 09: checkout attempt 2/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 19: checkout attempt 3/3 failed: OutOfStock: KEN-NYERI-250: wanted 1, 0 available
buyer 19: error: RetryableError
[... 31 similar lines for buyers 02, 04-06, 08-10, 12, 13, 15-18, 20 ...]
=========================== short test summary info ============================
FAILED tests/test_checkout.py::test_drop_never_oversells_or_double_charges - AssertionError: a buyer was charged twice
============================== 1 failed in 3.87s ===============================
'''

REPO_RESERVE_OLD = '''def reserve_stock(conn: sqlite3.Connection, order_id: int, items: list[tuple[int, int]],
                  ttl: timedelta = timedelta(minutes=10)) -> None:
    expires = (datetime.now(timezone.utc) + ttl).isoformat(timespec="seconds")
    for product_id, qty in items:
        row = conn.execute("SELECT sku, stock FROM products WHERE id = ?", (product_id,)).fetchone()
        if row["stock"] < qty:
            raise OutOfStock(row["sku"], wanted=qty, available=row["stock"])
        conn.execute("UPDATE products SET stock = stock - ? WHERE id = ?", (qty, product_id))
        conn.execute(
            "INSERT INTO stock_reservations (order_id, product_id, quantity, expires_at) VALUES (?, ?, ?, ?)",
            (order_id, product_id, qty, expires),
        )'''

REPO_RESERVE_FIXED = '''def reserve_stock(conn: sqlite3.Connection, order_id: int, items: list[tuple[int, int]],
                  ttl: timedelta = timedelta(minutes=10)) -> None:
    # One conditional UPDATE per item: the check and the decrement are a single
    # statement, so there is no read-then-write window for another buyer.
    expires = (datetime.now(timezone.utc) + ttl).isoformat(timespec="seconds")
    for product_id, qty in items:
        cur = conn.execute("UPDATE products SET stock = stock - ? WHERE id = ? AND stock >= ?",
                           (qty, product_id, qty))
        if cur.rowcount == 0:
            sku, stock = conn.execute("SELECT sku, stock FROM products WHERE id = ?", (product_id,)).fetchone()
            raise OutOfStock(sku, wanted=qty, available=stock)
        conn.execute(
            "INSERT INTO stock_reservations (order_id, product_id, quantity, expires_at) VALUES (?, ?, ?, ?)",
            (order_id, product_id, qty, expires),
        )'''


def bug_hunt() -> Session:
    """Thursday 5 March: checkout, a double charge under concurrency, then logging."""
    s = Session("bug-hunt", "2026-03-05T10:20:00")
    s.user("""
Confession: I wired up checkout myself last night in orders/checkout.py because I got impatient.
Manual test worked. Can you add the concurrency test we talked about, the Friday drop one?
20 buyers, 5 bags.
""")
    s.tools(read("orders/checkout.py", CHECKOUT_PY), search("def (release_order|mark_paid)", "orders/", """
orders/repo.py:71:def release_order(conn: sqlite3.Connection, order_id: int) -> None:
orders/repo.py:80:def mark_paid(conn: sqlite3.Connection, order_id: int) -> None:
"""), say="Let me read what's there first.")
    s.bot("""
Read it. The flow is right: reserve and create the order in one transaction, charge outside
it, then confirm or release. One thing worries me, `_retry_checkout` around the whole
function, but let me write the test first and let it tell us.

The test: a shop with 5 bags of KEN-NYERI-250 and 20 buyers, each in its own thread with its
own connection to the same file, all starting at once behind a `threading.Barrier`. It checks:
(1) sold + remaining stock == 5, (2) every buyer pays with their own payment method, and Paystream must
never see one buyer's payment method charged twice.
""")
    s.call(write("tests/test_checkout.py", '''
import sys
import threading
from collections import Counter

from orders import checkout, db
from orders.payments import PaymentsClient
from orders.retry import RetryPolicy

from .conftest import setup_shop  # shop with one product and N customers


def run_buyers(path, url, buyers, qty):
    barrier = threading.Barrier(buyers)
    results = [None] * buyers

    def buy(i):
        conn = db.connect(path)
        client = PaymentsClient(url, "test-token", RetryPolicy(base_delay=0))
        barrier.wait()
        try:
            results[i] = checkout.checkout(conn, client, i + 1, [(1, qty, 1650)], f"pm_buyer_{i + 1:02d}")
            print(f"buyer {i + 1:02d}: {results[i]} paid", file=sys.stderr)
        except Exception as exc:
            results[i] = f"error: {type(exc).__name__}"
            print(f"buyer {i + 1:02d}: {results[i]}", file=sys.stderr)

    threads = [threading.Thread(target=buy, args=(i,), name=f"buyer {i + 1:02d}") for i in range(buyers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return results


def test_drop_never_oversells_or_double_charges(tmp_path, paystream):
    url, script, seen = paystream
    path = str(tmp_path / "orders.db")
    setup_shop(path, sku="KEN-NYERI-250", stock=5, customers=20)
    results = run_buyers(path, url, buyers=20, qty=1)
    charges = Counter(body["payment_method"] for _, body in seen)
    assert max(charges.values()) == 1, "a buyer was charged twice"
    sold = [r for r in results if r.startswith("ord_")]
    stock = db.connect(path).execute("SELECT stock FROM products").fetchone()[0]
    assert len(sold) == 5 - stock
'''))
    s.tool("run", {"command": "pytest tests/test_checkout.py -q"}, """
.                                                                        [100%]
1 passed in 1.92s
""", secs=4)
    s.bot("Passes on the first run. Concurrency bugs like to hide, so let me run it 30 times in a row.")
    s.tool("run", {"command": "for i in $(seq 30); do pytest tests/test_checkout.py -q -p no:cacheprovider > /tmp/run_$i.log 2>&1 || echo \"run $i FAILED\"; done; grep -l failed /tmp/run_*.log | wc -l"}, """
run 4 FAILED
run 11 FAILED
run 17 FAILED
run 23 FAILED
run 28 FAILED
5
""", secs=71)
    s.bot("5 failures out of 30, so about 1 in 6. Here's the log of one:")
    s.tool("run", {"command": "pytest tests/test_checkout.py -vv -p no:cacheprovider  # rerun until it fails, run 11 shown"}, CONCURRENCY_LOG, secs=5)
    s.user("""
ugh. 'a buyer was charged twice'. Buyer 01 paid twice?? I thought the idempotency key made
that impossible.
""")
    s.bot("""
Follow buyer 01 in the captured stderr:
1. Attempt 1 fails with `database is locked` while reserving stock. That transaction rolls
   back, so nothing has happened yet.
2. Attempt 2 creates `ord_9cw2hs7dn4fe`, reserves a bag, commits, and **charges it** (key
   `charge-ord_9cw2hs7dn4fe`). Then the last transaction, confirm + `mark_paid`, hits
   `database is locked`. Your `_retry_checkout` treats **every** exception
   (`except Exception`) as retryable, so it runs the whole checkout again.
3. Attempt 3 creates a **second order**, `ord_h4kq8w2mz7rb`, reserves a second bag and charges
   again with key `charge-ord_h4kq8w2mz7rb`.

The idempotency key only protects repeats of one charge call. A retry that re-creates the
order brings a new order id and therefore a new key, so Paystream sees two different
payments: a real double charge. On top of that, `ord_9cw2hs7dn4fe` stays `pending` and
holds a bag until its reservation expires.

There's also a second, separate problem: **why is the database locked at all?** Two things
in my code from Monday:
- `db.connect` never sets `busy_timeout`, so a writer that finds the lock taken fails at once
  instead of waiting.
- `db.transaction` uses a plain `BEGIN` (deferred). `reserve_stock` first SELECTs (read
  snapshot) and then UPDATEs. In WAL mode, if another writer commits in between, the upgrade
  fails with SQLITE_BUSY_SNAPSHOT, and no busy timeout can help with that, because our
  snapshot is stale.

I flagged the read-then-write in `reserve_stock` on Monday and then didn't fix it. My fault.
""")
    s.tools(run("sqlite3 /tmp/pytest-of-dana/pytest-41/test_drop_never_oversells_or_d0/orders.db 'PRAGMA journal_mode; PRAGMA busy_timeout; SELECT status, count(*) FROM orders GROUP BY status;'", """
wal
0
paid|4
pending|1
"""), search("call_with_retry|_retry_checkout", "orders/", """
orders/checkout.py:9:from .retry import RetryableError, RetryPolicy, call_with_retry
orders/checkout.py:13:def _retry_checkout(fn):
orders/checkout.py:21:        return call_with_retry(once, RetryPolicy())
orders/checkout.py:25:@_retry_checkout
orders/payments.py:6:from .retry import RetryableError, RetryPolicy, call_with_retry
orders/payments.py:42:        return call_with_retry(once, self.policy)
"""), say="Confirming with the database the failed run left behind, and checking where retries are applied:")
    s.bot("""
The database confirms it: `busy_timeout` is 0; 4 paid orders plus buyer 01's charged but
`pending` order hold the 5 bags (no oversell, the CHECK constraint held). Retries are applied
in two places: the payments client (correct) and around the whole checkout (the source of the
second charge).

Proposed fix, three parts:
1. `db.connect`: `PRAGMA busy_timeout = 5000`, so writers wait up to 5 s for the lock.
2. `db.transaction`: `BEGIN IMMEDIATE`, so the write lock is taken at the start and a
   transaction never upgrades mid-way; plus a single conditional UPDATE in `reserve_stock`
   (`... WHERE id = ? AND stock >= ?`, check `rowcount`) instead of SELECT-then-UPDATE.
3. Delete `_retry_checkout`. Retries belong only around the one idempotent call,
   `PaymentsClient.charge`, which already has them. A database error in checkout should
   reach the caller, which returns a 503 to the customer with nothing charged.

OK to remove your decorator?
""")
    s.user("""
Yes kill it, that was 1am code. And yes to all three. Honestly, put "retries only around a
single idempotent call" somewhere people will read it.
""")
    s.tools(edit("orders/db.py", '''    conn.execute("PRAGMA foreign_keys = ON")
    return conn''', '''    conn.execute("PRAGMA foreign_keys = ON")
    # Writers wait for the lock instead of failing at once ("database is locked").
    conn.execute("PRAGMA busy_timeout = 5000")
    return conn'''),
            edit("orders/db.py", '''    conn.execute("BEGIN")''', '''    # IMMEDIATE takes the write lock up front: a transaction that read a snapshot
    # can never fail later when it upgrades to write (SQLITE_BUSY_SNAPSHOT under WAL).
    conn.execute("BEGIN IMMEDIATE")'''),
            edit("orders/repo.py", REPO_RESERVE_OLD, REPO_RESERVE_FIXED),
            edit("orders/checkout.py", "@_retry_checkout\ndef checkout(", "def checkout("),
            say="Applying the three fixes.")
    s.tools(edit("orders/checkout.py", CHECKOUT_PY[CHECKOUT_PY.index("def _retry_checkout"):
                                                   CHECKOUT_PY.index("@_retry_checkout")], ""),
            edit("orders/checkout.py", "import sys\nimport threading\n", ""),
            edit("orders/checkout.py", "from .retry import RetryableError, RetryPolicy, call_with_retry",
                 "from .retry import RetryableError"))
    s.tool("run", {"command": "for i in $(seq 100); do pytest tests/test_checkout.py -q -p no:cacheprovider > /tmp/run_$i.log 2>&1 || echo \"run $i FAILED\"; done; echo \"$(grep -l '1 passed' /tmp/run_*.log | wc -l)/100 passed\"; pytest -q"}, """
100/100 passed
.............                                                            [100%]
12 passed in 2.41s
""", secs=212)
    s.bot("""
100 of 100 runs pass now (before the fix 5 of 30 failed), and the whole suite is green with
12 tests. I'm adding a "Retries" section to CONTRIBUTING.md and an addendum to ADR 0002:
> Retry only around a single idempotent call (today: `PaymentsClient.charge`, keyed by the
> order id). Never wrap a function that creates rows, reserves stock or sends email in a retry.
""")
    s.tools(edit("CONTRIBUTING.md", "- Errors: `OrderError` base; ORD-1xx validation, ORD-2xx stock, ORD-3xx payment.\n",
                 "- Errors: `OrderError` base; ORD-1xx validation, ORD-2xx stock, ORD-3xx payment.\n\n"
                 "## Retries\n- Retry only around a single idempotent call (today: `PaymentsClient.charge`, keyed\n"
                 "  by the order's public id). Never retry a function that creates rows, reserves stock or\n"
                 "  sends email: see the 5 March double-charge bug in ADR 0002.\n"),
            edit("docs/decisions/0002-payment-retry-policy.md", "Why full jitter:",
                 "Addendum 2026-03-05: a retry decorator around the whole checkout re-ran order creation and\n"
                 "charged one buyer twice, under two order ids, in a concurrency test (5 of 30 runs). Retries now wrap only the\n"
                 "charge call. SQLite connections use busy_timeout 5000 ms and BEGIN IMMEDIATE.\n\nWhy full jitter:"))
    s.user("Perfect. Coffee break, then something different.")
    s.pause(22)
    s.user("""
New topic: logging. Priya wants logs she can ship to her Grafana/Loki setup. What's the plan?
Nothing fancy please.
""")
    s.bot("""
Keeping it small:
- stdlib `logging` with one JSON formatter we write ourselves (about 30 lines, no structlog
  dependency), one object per line on stdout. systemd's journal picks that up and Priya's
  promtail sends it to Loki.
- fixed fields: `ts` (UTC ISO-8601), `level`, `event` (a short snake_case name like
  `checkout_paid`), `logger`, plus context fields: `order_id` (the public `ord_` id),
  `request_id`, `attempt` for retries, `duration_ms`.
- events instead of prose: `log.info("charge_retry", extra={"order_id": ..., "attempt": 2})`.
- levels: INFO for business events, WARNING for retries, ERROR for failed checkouts.

One question: what about customer data in logs?
""")
    s.user("""
None. No emails, no names, no addresses, no card anything. Public order id is the handle,
support can look up the rest in the DB. That's a hard rule, GDPR is Tomás's nightmare.
""")
    s.bot("""
Hard rule then: **no personal data in logs**. Only public ids (`ord_`, `cus_`), amounts,
SKUs, status codes and timings. I'll enforce it in code too: the formatter drops any
field whose name is on a deny list (`email`, `name`, `address`, `phone`, `card`, `payment_method`),
and a test asserts that a checkout's logs contain no `@`.
""")
    s.tools(write("orders/logs.py", '''
"""JSON-lines logging for Loki. No personal data: public ids, amounts, SKUs and timings only."""

from __future__ import annotations

import json
import logging
from datetime import datetime, timezone

_DENY = {"email", "name", "address", "phone", "card", "payment_method"}
_STD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        out = {
            "ts": datetime.fromtimestamp(record.created, timezone.utc).isoformat(timespec="milliseconds"),
            "level": record.levelname.lower(),
            "event": record.getMessage(),
            "logger": record.name,
        }
        for key, value in vars(record).items():
            if key not in _STD and key not in _DENY:
                out[key] = value
        return json.dumps(out, default=str)


def setup(level: str = "INFO") -> None:
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
'''), write("tests/test_logs.py", '''
import json
import logging

from orders.logs import JsonFormatter


def test_log_line_is_json_with_event_and_context():
    record = logging.LogRecord("orders.checkout", logging.INFO, "", 0, "checkout_paid", None, None)
    record.order_id = "ord_7k2m9xq4bz1t"
    record.duration_ms = 412
    line = json.loads(JsonFormatter().format(record))
    assert (line["event"], line["order_id"], line["duration_ms"]) == ("checkout_paid", "ord_7k2m9xq4bz1t", 412)


def test_personal_fields_are_dropped():
    record = logging.LogRecord("orders.checkout", logging.INFO, "", 0, "checkout_started", None, None)
    record.email = "dana@example.com"
    record.payment_method = "pm_card_visa"
    line = JsonFormatter().format(record)
    assert "@" not in line and "pm_card" not in line
'''), say="Writing the formatter and its tests.")
    s.tool("run", {"command": "pytest -q"}, """
...............                                                          [100%]
14 passed in 2.37s
""", secs=4)
    s.bot("""
14 passed. `orders/logs.py` writes one JSON object per line with `ts`, `level`, `event`,
`logger` and context fields, and drops the deny-listed personal fields. Priya's promtail
only needs to parse JSON from the unit's journal.
""")
    s.user("""
Great. I'm off next week (conference in Lisbon, then a few days off), back Monday the 16th.
Tomás might poke you about the CSV export for Northbeam, but don't start anything big.
""")
    s.bot("""
Enjoy Lisbon. State before you go:
- the double-charge bug is fixed (busy_timeout 5000, BEGIN IMMEDIATE, conditional UPDATE,
  no retry around checkout); 100/100 concurrency runs green
- JSON logging without personal data, 14 tests green
- open: the CSV export for Northbeam (small, only if Tomás asks), the reconcile job for pending
  charges, and the HTTP API layer itself
""")
    return s


LOADTEST_OUT = '''
          /\\      Grafana   /‾‾/
     /\\  /  \\     |\\  __   /  /
    /  \\/    \\    | |/ /  /   ‾‾\\
   /          \\   |   (  |  (‾)  |
  / __________ \\  |_|\\_\\  \\_____/

     execution: local
        script: load/friday_drop.js
        output: -

     scenarios: (100.00%) 1 scenario, 400 max VUs, 6m30s max duration (incl. graceful stop):
              * drop: Up to 250.00 iterations/min for 6m0s over 3 stages (maxVUs: 400, gracefulStop: 30s)

     ✓ status is 201 or 409 (sold out)
     ✗ status is not 5xx
      ↳  95% — ✓ 1398 / ✗ 73
     ✗ checkout under 1500ms
      ↳  81% — ✓ 1192 / ✗ 279

     checks.........................: 88.12% ✓ 2590      ✗ 352
     data_received..................: 1.1 MB 3.0 kB/s
     data_sent......................: 893 kB 2.5 kB/s
     http_req_blocked...............: avg=1.2ms    min=1µs     med=4µs      max=141ms    p(90)=7µs      p(95)=9µs
     http_req_duration..............: avg=612.4ms  min=38.1ms  med=211.7ms  max=5.21s    p(90)=1.61s    p(95)=1.84s
       { expected_response:true }...: avg=488.9ms  min=38.1ms  med=197.3ms  max=4.96s    p(90)=1.22s    p(95)=1.53s
     http_req_failed................: 4.96%  ✓ 73        ✗ 1398
     http_reqs......................: 1471   4.08/s
     iteration_duration.............: avg=1.63s    min=1.03s   med=1.21s    max=6.22s    p(90)=2.62s    p(95)=2.85s
     iterations.....................: 1471   4.08/s
     vus............................: 14     min=1       max=61
     vus_max........................: 400    min=400     max=400

running (6m00.4s), 000/400 VUs, 1471 complete and 0 interrupted iterations
drop ✓ [======================================] 000/400 VUs  6m0s  250.00 iterations/min

ERRO[0361] thresholds on metrics 'http_req_failed, http_req_duration' have been crossed

--- server side (journalctl -u larkspur-orders@* --since 09:02 | jq -r .event | sort | uniq -c | sort -rn | head)
   1398 checkout_paid
    212 charge_retry
     61 db_busy_timeout
     41 charge_rate_limited
     12 checkout_failed_payment
      8 reservation_expired_released
'''


def load_test() -> Session:
    """Monday 16 March, after an eleven-day gap: a load test, two writers, PostgreSQL."""
    s = Session("load-test", "2026-03-16T09:40:00")
    s.user("""
I'm back! Lisbon was great. Bad news though: while I was away Priya and Tomás changed the
deployment plan. Priya, you want to explain? (Priya's in this chat now.)
""")
    s.user("""
Hi! Short version: for the Friday drop we don't want a single VM as a single point of failure,
so the API runs as two replicas on two VMs behind the load balancer. And Northbeam's
integration is happening after all: Ines's team will run a worker that marks orders shipped,
writing to our DB directly through a small API we give them. Tomás signed the contract Thursday.
Friday I ran a k6 load test against staging at drop-level traffic with the current build,
SQLite file on a shared NFS volume so both VMs can see it. It did not go well.
""", name="priya")
    s.bot("""
Hi Priya. That's exactly the revisit trigger in ADR 0001: "a second process must write
(a Northbeam worker or a second API replica)". Now we have both. And SQLite on a shared NFS
volume is the one setup the ADR rules out outright: NFS locking doesn't protect SQLite, so two
hosts writing the same file can corrupt it, not just slow down. Could you share the k6 output?
""")
    s.tool("run", {"command": "cat ~/shared/loadtests/2026-03-13-drop-staging.txt"}, LOADTEST_OUT, secs=1)
    s.bot("""
What the numbers say (250 checkouts/min for 6 minutes, 1,471 requests):
- **4.96 % failed** (73 requests with 5xx), and `db_busy_timeout` shows up 61 times on the
  server side: writers from two hosts queue behind one file lock over NFS, and some wait
  past the 5 s busy timeout.
- **p95 1.84 s, max 5.21 s**; `checkout under 1500ms` holds for only 81 %.
- **`charge_retry` 212 times and `charge_rate_limited` 41 times**: Paystream answered 429
  during the drop. We don't retry 429 at all today (ADR 0002 leaves it out), so those 41
  turned straight into failures for customers.

So there are two separate problems: the database and the retry policy.
""")
    s.user("""
Yeah. I'd like to not run two databases' worth of ops though. We have a managed Postgres
offer from our host: EUR 45/month for 2 vCPU / 4 GB, daily backups and PITR included.
Does that fit the budget Dana had?
""", name="priya")
    s.bot("""
The cap is EUR 150 a month. Two VMs at EUR 24 = EUR 48, managed PostgreSQL EUR 45, load
balancer (what does your host charge?), object-storage backups EUR 3. Without the LB that's
EUR 96.
""")
    s.user("LB is EUR 6. So 102.", name="priya")
    s.user("""
Then we're at EUR 102 of 150, fine. Let's do it: move to PostgreSQL now, before the launch on
Friday the 20th. Agent, is that realistic in 4 days given everything is plain SQL?
""")
    s.bot("""
Realistic, because we kept the move cheap on purpose: all SQL is in `orders/repo.py`, no ORM,
money in integer cents, UTC timestamps. Here's what has to change:
- driver: `sqlite3` → `psycopg` 3 with a `psycopg_pool.ConnectionPool`; placeholders `?` → `%s`
- DDL: `INTEGER PRIMARY KEY` → `BIGINT GENERATED ALWAYS AS IDENTITY`; `*_at` text →
  `timestamptz`; `lastrowid` → `INSERT ... RETURNING id`
- locking: `BEGIN IMMEDIATE` goes away; the conditional `UPDATE ... WHERE stock >= %s` works
  the same under READ COMMITTED (row lock, re-check on the updated row)
- Northbeam worker: picks paid orders with `SELECT ... FOR UPDATE SKIP LOCKED`, so several
  workers never take the same order
- tests: run against a real PostgreSQL (a throwaway local instance per test session); the
  concurrency test stays as it is
- data: staging only, no production data yet, so a one-off copy script is enough

Rough plan: today DDL + repo + tests, tomorrow the worker API and the copy, Wednesday a load
test rerun, Thursday buffer.
""")
    s.user("""
Go. Write ADR 0003 that supersedes 0001 (keep 0001, mark it superseded). Priya, can you
provision the instance today?
""")
    s.user("On it, you'll have a DSN in the vault at shop/larkspur/postgres by noon.", name="priya")
    s.call(write("docs/decisions/0003-move-to-postgresql.md", """
# ADR 0003: Move from SQLite to PostgreSQL 16

Date: 2026-03-16. Status: accepted. Supersedes ADR 0001. Deciders: Dana Okafor, Priya Raman.

## Context
ADR 0001's revisit trigger has fired twice: the API now runs as two replicas on two VMs behind
a load balancer, and Northbeam Logistics' fulfillment worker will write order status.
The staging load test of 13 March (250 checkouts/min, SQLite on shared NFS) failed 4.96 % of
requests with p95 1.84 s; 61 requests hit the 5 s busy timeout.

## Decision
Managed PostgreSQL 16 from our host (2 vCPU / 4 GB, daily backups + PITR, EUR 45/month).
psycopg 3 with psycopg_pool; still no ORM. Monthly infra: 2 VMs EUR 48 + PostgreSQL EUR 45 +
LB EUR 6 + backups EUR 3 = EUR 102 of the EUR 150 cap.

## Consequences
- identity columns, timestamptz, INSERT ... RETURNING
- the Northbeam worker claims orders with FOR UPDATE SKIP LOCKED
- tests run against a real local PostgreSQL
"""))
    s.call(edit("docs/decisions/0001-sqlite-first.md", "Status: accepted.",
                "Status: superseded by ADR 0003 (2026-03-16)."))
    s.user("""
Now the retry side. I talked to Wei this morning. Paystream rate-limits us at 20 charges/s
per merchant with bursts, and during a drop they'd rather we back off harder. He asked for:
honor Retry-After on 429, longer backoff, and please don't hammer them when they're
degraded. What would you change?
""")
    s.bot("""
Proposed replacement for the policy in ADR 0002:
- **4 attempts** instead of 3, since rate limiting is short-lived and worth waiting out
- **base 500 ms** instead of 200 ms, factor 2, **full jitter** kept, so the delay ranges
  are 0-0.5 s, 0-1 s, 0-2 s
- **cap 5 s** on a single delay (was 2 s); **overall deadline 10 s** (was 6 s); per-attempt
  timeout stays 2.5 s
- **429 becomes retryable**: when there's a `Retry-After` header we wait that long instead
  of the jittered delay (if it fits the deadline; otherwise we give up at once)
- the rest unchanged: 409/500/502/503/504 and network errors are retried with the same
  `charge-<order id>` key; 400/401/402/422 never are

For "don't hammer them when degraded" I'd add a small circuit breaker: after 10 consecutive
failed charges within 30 s, stop calling for 15 s and fail fast with ORD-302 "payment provider
unavailable". That protects Paystream and also gives customers a quick answer.
""")
    s.user("""
Customers waiting up to 10s... Tomás will hate that. But a failed payment in the drop is
worse, they lose the bag. OK: 4 attempts, 500ms base, 5s cap, 10s deadline, Retry-After
honored, 429 retryable, plus the breaker. Make the checkout page say 'confirming payment…'
after 2s, I'll tell Tomás. Record it as ADR 0004 superseding 0002.
""")
    s.tools(write("docs/decisions/0004-payment-retry-policy-v2.md", """
# ADR 0004: Payment retry policy v2 (supersedes ADR 0002)

Date: 2026-03-16. Status: accepted. Deciders: Dana Okafor; requested by Wei Zhang (Paystream).

Why: in the 13 March load test Paystream rate-limited 41 charges (429), which we did not retry.
Paystream limits a merchant to 20 charges/s with bursts and asked us to back off harder.

- 4 attempts in total; exponential backoff base 500 ms, factor 2, full jitter; single delay
  capped at 5 s; overall deadline 10 s; per-attempt timeout 2.5 s (unchanged).
- 429 is retryable; Retry-After (seconds) replaces the jittered delay when it fits the deadline.
- Still retried: connect errors, timeouts, 409, 500, 502, 503, 504. Never: 400/401/402/422.
- Idempotency-Key unchanged: `charge-<order public id>`.
- Circuit breaker: 10 consecutive failures within 30 s open it for 15 s; calls then fail fast
  with ORD-302 "payment provider unavailable".
- UX: the checkout page shows "confirming payment..." after 2 s.
- Retries wrap only the charge call (ADR 0002 addendum of 2026-03-05 still applies).
"""), edit("docs/decisions/0002-payment-retry-policy.md", "Status: accepted.",
           "Status: superseded by ADR 0004 (2026-03-16)."),
            edit("orders/retry.py", '''    attempts: int = 3            # total tries, the first one included
    base_delay: float = 0.200    # seconds; delay before retry n is uniform(0, base * 2**n)
    max_delay: float = 2.0       # cap on a single delay
    deadline: float = 6.0        # give up when the next try would start later than this''',
                 '''    attempts: int = 4            # total tries, the first one included (ADR 0004)
    base_delay: float = 0.500    # seconds; delay before retry n is uniform(0, base * 2**n)
    max_delay: float = 5.0       # cap on a single delay
    deadline: float = 10.0       # give up when the next try would start later than this'''),
            say="Writing ADR 0004, marking 0002 superseded, and changing the defaults.")
    s.call(edit("orders/retry.py", '''class RetryableError(Exception):
    """Raised by a call that may be tried again with the same idempotency key."""''',
                '''class RetryableError(Exception):
    """Raised by a call that may be tried again with the same idempotency key.

    ``retry_after`` (seconds) is the server's Retry-After, when it sent one.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after'''))
    s.call(edit("orders/retry.py", '''            pause = policy.delay(attempt, rng)''',
                '''            pause = exc.retry_after if exc.retry_after is not None else policy.delay(attempt, rng)''',
                result="edit_file: old text not found in orders/retry.py"))
    s.call(read("orders/retry.py", '''
"""Retry with exponential backoff and full jitter, for idempotent calls only."""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 4            # total tries, the first one included (ADR 0004)
    base_delay: float = 0.500    # seconds; delay before retry n is uniform(0, base * 2**n)
    max_delay: float = 5.0       # cap on a single delay
    deadline: float = 10.0       # give up when the next try would start later than this

    def delay(self, retry: int, rng: random.Random) -> float:
        return rng.uniform(0, min(self.max_delay, self.base_delay * 2 ** retry))


class RetryableError(Exception):
    """Raised by a call that may be tried again with the same idempotency key.

    ``retry_after`` (seconds) is the server's Retry-After, when it sent one.
    """

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def call_with_retry(fn: Callable[[], T], policy: RetryPolicy, *, rng: random.Random | None = None,
                    sleep: Callable[[float], None] = time.sleep,
                    clock: Callable[[], float] = time.monotonic) -> T:
    rng = rng or random.Random()
    start = clock()
    for attempt in range(policy.attempts):
        try:
            return fn()
        except RetryableError:
            if attempt == policy.attempts - 1:
                raise
            pause = policy.delay(attempt, rng)
            if clock() - start + pause > policy.deadline:
                raise
            sleep(pause)
    raise AssertionError("unreachable")
'''), say="The edit missed; reading the file to see its current text.")
    s.tools(edit("orders/retry.py", '''        except RetryableError:
            if attempt == policy.attempts - 1:
                raise
            pause = policy.delay(attempt, rng)''', '''        except RetryableError as exc:
            if attempt == policy.attempts - 1:
                raise
            # Retry-After is the server telling us exactly when; it beats our guess.
            pause = exc.retry_after if exc.retry_after is not None else policy.delay(attempt, rng)'''),
            edit("orders/payments.py", "RETRYABLE_STATUS = {409, 500, 502, 503, 504}",
                 "RETRYABLE_STATUS = {409, 429, 500, 502, 503, 504}"),
            say="The `except` line has no `as exc` yet; that's why it didn't match. Fixing both places.")
    s.call(edit("orders/payments.py", '''            if r.status_code in RETRYABLE_STATUS:
                raise RetryableError(f"paystream {r.status_code}")''', '''            if r.status_code in RETRYABLE_STATUS:
                after = r.headers.get("Retry-After")
                raise RetryableError(f"paystream {r.status_code}",
                                     retry_after=float(after) if after and after.isdigit() else None)'''))
    s.call(write("tests/test_retry_v2.py", '''
import random

import pytest

from orders.retry import RetryableError, RetryPolicy, call_with_retry


def test_policy_defaults_match_adr_0004():
    p = RetryPolicy()
    assert (p.attempts, p.base_delay, p.max_delay, p.deadline) == (4, 0.5, 5.0, 10.0)


def test_retry_after_replaces_the_jittered_delay():
    tries, sleeps = [], []

    def fn():
        tries.append(1)
        if len(tries) == 1:
            raise RetryableError("429", retry_after=3.0)
        return "ok"

    assert call_with_retry(fn, RetryPolicy(), rng=random.Random(3), sleep=sleeps.append) == "ok"
    assert sleeps == [3.0]


def test_retry_after_past_the_deadline_gives_up_at_once():
    sleeps = []

    def fn():
        raise RetryableError("429", retry_after=30.0)

    with pytest.raises(RetryableError):
        call_with_retry(fn, RetryPolicy(), rng=random.Random(3), sleep=sleeps.append)
    assert sleeps == []
'''))
    s.tool("run", {"command": "pytest -q"}, """
....F..............                                                      [100%]
=================================== FAILURES ===================================
_________________________ test_gives_up_after_three_attempts __________________________

    def test_gives_up_after_three_attempts():
        fn, calls = flaky(5)
        with pytest.raises(RetryableError):
            call_with_retry(fn, RetryPolicy(), rng=random.Random(7), sleep=lambda s: None)
>       assert len(calls) == 3
E       assert 4 == 3
E        +  where 4 = len([1, 1, 1, 1])

tests/test_retry.py:24: AssertionError
=========================== short test summary info ============================
FAILED tests/test_retry.py::test_gives_up_after_three_attempts - assert 4 == 3
1 failed, 16 passed in 2.52s
""", secs=4)
    s.bot("""
Expected: that test pinned the old policy's 3 attempts. I'll rename it to
`test_gives_up_after_the_policy_attempts` and assert against `RetryPolicy().attempts`, so it
follows the ADR instead of repeating a number.
""")
    s.call(edit("tests/test_retry.py", '''def test_gives_up_after_three_attempts():
    fn, calls = flaky(5)
    with pytest.raises(RetryableError):
        call_with_retry(fn, RetryPolicy(), rng=random.Random(7), sleep=lambda s: None)
    assert len(calls) == 3''', '''def test_gives_up_after_the_policy_attempts():
    fn, calls = flaky(9)
    with pytest.raises(RetryableError):
        call_with_retry(fn, RetryPolicy(), rng=random.Random(7), sleep=lambda s: None)
    assert len(calls) == RetryPolicy().attempts'''))
    s.tool("run", {"command": "pytest -q"}, """
...................                                                      [100%]
17 passed in 2.49s
""", secs=4)
    s.bot("17 passed. The circuit breaker is next; it's small, so I'll do it tomorrow morning together with the PostgreSQL repo, once the DSN is in the vault.")
    s.user("""
Fine. Priya says the DSN will be in the vault by tonight at the latest. Let's stop here for
today, I'm still half in Lisbon mode.
""")
    s.bot("""
Makes sense. Where we are:
- ADR 0003: PostgreSQL 16 (managed, EUR 45/month), supersedes ADR 0001; infra EUR 102 of 150
- ADR 0004: the new retry policy, supersedes ADR 0002; Retry-After and 429 done, 17 tests green
Tomorrow: schema v2 and repo on psycopg, the Northbeam claim queue, the circuit breaker,
copying the staging data.
""")
    return s


SCHEMA_PG = '''
-- Larkspur order service, schema v2 (PostgreSQL 16). Same conventions as v1:
-- plural snake_case tables, *_cents integers, *_at timestamps (now timestamptz), ord_/cus_ ids.

CREATE TABLE customers (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id   TEXT NOT NULL UNIQUE,
    email       TEXT NOT NULL UNIQUE,
    created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE products (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku          TEXT NOT NULL UNIQUE,
    name         TEXT NOT NULL,
    price_cents  INTEGER NOT NULL CHECK (price_cents >= 0),
    currency     CHAR(3) NOT NULL DEFAULT 'EUR',
    stock        INTEGER NOT NULL CHECK (stock >= 0)
);

CREATE TABLE orders (
    id            BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    public_id     TEXT NOT NULL UNIQUE,
    customer_id   BIGINT NOT NULL REFERENCES customers(id),
    status        TEXT NOT NULL CHECK (status IN ('pending', 'paid', 'failed', 'shipped', 'cancelled')),
    total_cents   INTEGER NOT NULL,
    currency      CHAR(3) NOT NULL,
    claimed_by    TEXT,                        -- fulfillment worker holding the order
    claimed_at    TIMESTAMPTZ,
    created_at    TIMESTAMPTZ NOT NULL DEFAULT now(),
    updated_at    TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE TABLE order_items (
    id                BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id          BIGINT NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    product_id        BIGINT NOT NULL REFERENCES products(id),
    quantity          INTEGER NOT NULL CHECK (quantity > 0),
    unit_price_cents  INTEGER NOT NULL
);

CREATE TABLE stock_reservations (
    id          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id    BIGINT NOT NULL REFERENCES orders(id) ON DELETE CASCADE,
    product_id  BIGINT NOT NULL REFERENCES products(id),
    quantity    INTEGER NOT NULL,
    expires_at  TIMESTAMPTZ NOT NULL
);

CREATE INDEX orders_customer_idx ON orders (customer_id, created_at);
CREATE INDEX orders_paid_unclaimed_idx ON orders (created_at) WHERE status = 'paid' AND claimed_by IS NULL;
CREATE INDEX stock_reservations_expiry_idx ON stock_reservations (expires_at);
'''

PG_TEST_FAIL = '''
============================= test session starts ==============================
platform linux -- Python 3.11.9, pytest-8.3.4, pluggy-1.5.0
rootdir: /home/dana/larkspur-orders
configfile: pyproject.toml
collected 19 items

tests/test_checkout.py F                                                 [  5%]
tests/test_db.py .F                                                      [ 15%]
tests/test_fulfillment.py ..                                             [ 26%]
tests/test_logs.py ..                                                    [ 36%]
tests/test_payments.py ...                                               [ 52%]
tests/test_repo.py EEE                                                   [ 68%]
tests/test_retry.py ...                                                  [ 84%]
tests/test_retry_v2.py ...                                               [100%]

==================================== ERRORS ====================================
_____________ ERROR at setup of test_reserve_stock_decrements_stock _____________

pg = <psycopg.Connection [IDLE] (host=127.0.0.1 port=54329 user=larkspur database=test_9) at 0x7f21c8e3a950>

    @pytest.fixture
    def conn(pg):
        pg.execute("INSERT INTO customers (public_id, email) VALUES ('cus_aaaaaaaaaaaa', 'a@example.com')")
>       pg.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES (?, ?, ?, ?)",
                   ("ETH-YIRG-250", "Yirgacheffe 250 g", 1450, 3))
E       psycopg.errors.SyntaxError: syntax error at or near ","
E       LINE 1: ...RT INTO products (sku, name, price_cents, stock) VALUES (?, ?, ?, ?)
E                                                                         ^

tests/test_repo.py:14: SyntaxError
(2 more errors at setup of tests/test_repo.py with the same cause)
=================================== FAILURES ===================================
_________________ test_drop_never_oversells_or_double_charges __________________

    def test_drop_never_oversells_or_double_charges(pg_dsn, paystream):
        url, script, seen = paystream
>       setup_shop(pg_dsn, sku="KEN-NYERI-250", stock=5, customers=20)

tests/test_checkout.py:38:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
tests/conftest.py:61: in setup_shop
    conn.execute("INSERT INTO customers (public_id, email, created_at) VALUES (?, ?, ?)", rows)
E   psycopg.errors.SyntaxError: syntax error at or near ","
E   LINE 1: ...O customers (public_id, email, created_at) VALUES (?, ?, ?)
E                                                                 ^
________________________ test_stock_cannot_go_negative _________________________

pg = <psycopg.Connection [IDLE] (host=127.0.0.1 port=54329 user=larkspur database=test_3) at 0x7f21c8e2f6d0>

    def test_stock_cannot_go_negative(pg):
        pg.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES ('ETH-YIRG-250', 'Yirgacheffe 250 g', 1450, 1)")
        with pytest.raises(psycopg.errors.CheckViolation):
>           pg.execute("UPDATE products SET stock = stock - 2 WHERE sku = ?", ("ETH-YIRG-250",))
E           psycopg.errors.SyntaxError: syntax error at end of input
E           LINE 1: UPDATE products SET stock = stock - 2 WHERE sku = ?
E                                                                    ^

tests/test_db.py:9: SyntaxError
=========================== short test summary info ============================
FAILED tests/test_checkout.py::test_drop_never_oversells_or_double_charges - psycopg.errors.SyntaxError: syntax error at or near ","
FAILED tests/test_db.py::test_stock_cannot_go_negative - psycopg.errors.SyntaxError: syntax error at end of input
ERROR tests/test_repo.py::test_reserve_stock_decrements_stock - psycopg.errors.SyntaxError: syntax error at or near ","
ERROR tests/test_repo.py::test_reserve_stock_refuses_more_than_available - psycopg.errors.SyntaxError: syntax error at or near ","
ERROR tests/test_repo.py::test_release_expired_returns_stock - psycopg.errors.SyntaxError: syntax error at or near ","
=============== 2 failed, 14 passed, 3 errors in 4.77s ===============
'''

COPY_OUT = '''
copy sqlite:/var/lib/larkspur/staging/orders.db -> postgresql://larkspur@pg-staging.internal/larkspur
  customers            1,204 rows   0.21 s
  products                38 rows   0.01 s
  orders               2,314 rows   0.37 s
  order_items          3,977 rows   0.44 s
  stock_reservations       0 rows   (expired reservations released first: 3)
identity sequences reset: customers 1205, products 39, orders 2315, order_items 3978
checks
  row counts            equal (5 tables)
  sum(total_cents)      4,183,650 = 4,183,650
  sum(stock)            1,117 = 1,117
  orders by status      paid 2,209 · shipped 61 · failed 37 · cancelled 7 = same
done in 1.42 s
'''

EXPLAIN_OUT = '''
                                                               QUERY PLAN
----------------------------------------------------------------------------------------------------------------------------------------
 Limit  (cost=0.28..8.61 rows=10 width=52) (actual time=0.041..0.063 rows=10 loops=1)
   ->  LockRows  (cost=0.28..171.43 rows=205 width=52) (actual time=0.040..0.060 rows=10 loops=1)
         ->  Index Scan using orders_paid_unclaimed_idx on orders  (cost=0.28..169.38 rows=205 width=52) (actual time=0.024..0.033 rows=10 loops=1)
 Planning Time: 0.212 ms
 Execution Time: 0.091 ms
(5 rows)
'''


def postgres_day() -> Session:
    """Tuesday 17 March: psycopg, the schema on PostgreSQL, the Northbeam claim queue, the copy."""
    s = Session("postgres-migration", "2026-03-17T08:55:00")
    s.user("""
Fresh start. Priya put the staging DSN in the vault and the vault agent writes it to
/run/secrets/larkspur-db. Can you check the connection? Don't print the DSN.
""")
    s.tool("run", {"command": "psql \"$(cat /run/secrets/larkspur-db)\" -Atc 'select version(); show server_encoding; show timezone; show max_connections;'"}, """
PostgreSQL 16.4 on x86_64-pc-linux-gnu, compiled by gcc (GCC) 12.2.1, 64-bit
UTF8
Etc/UTC
100
""", say="Connecting without echoing the secret:", secs=2)
    s.bot("""
Connected: PostgreSQL 16.4, UTF8, timezone UTC, max_connections 100. With two API replicas at
most 10 pooled connections each, plus the Northbeam worker, we stay far below that.

Order of work: schema v2 → `db.py` with a pool → `repo.py` ported → tests on a local
throwaway PostgreSQL → Northbeam claim queue → circuit breaker → staging copy.
""")
    s.tools(write("orders/schema_pg.sql", SCHEMA_PG), write("orders/db.py", '''
"""Connections to the order database: psycopg 3 with a pool. Plain SQL, no ORM."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
from psycopg.rows import dict_row
from psycopg_pool import ConnectionPool

SCHEMA = Path(__file__).with_name("schema_pg.sql")


def pool(dsn: str, max_size: int = 10) -> ConnectionPool:
    return ConnectionPool(dsn, min_size=2, max_size=max_size, kwargs={"row_factory": dict_row},
                          open=True)


def init_db(conn: psycopg.Connection) -> None:
    conn.execute(SCHEMA.read_text())


@contextmanager
def transaction(conn: psycopg.Connection) -> Iterator[psycopg.Connection]:
    # READ COMMITTED is enough: every stock change is one conditional UPDATE,
    # which re-checks the row after waiting for a concurrent writer.
    with conn.transaction():
        yield conn
'''), say="Schema v2 and the new connection module:")
    s.user("""
Why is the pool max 10? And why min 2, we're tiny.
""")
    s.bot("""
A checkout holds a connection for two short transactions, a few ms each. The payment call
happens between them without a connection. At 250 checkouts a minute that's about 4 a second,
so 2-3 busy connections per replica at peak. 10 leaves headroom for the admin endpoints and a
slow query without queueing. Two replicas × 10 + the worker's 2 = 22 of the 100 allowed.

min 2 keeps a warm connection for the first request after a quiet night, so the first
checkout at 12:00 on a Friday doesn't pay for a TLS handshake. Both values can be set with
`LARKSPUR_DB_POOL_MAX` / `LARKSPUR_DB_POOL_MIN` if Priya wants them different.
""")
    s.user("ok. port the repo.")
    s.call(write("orders/repo.py", '''
"""All SQL of the order service lives here (PostgreSQL)."""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta, timezone

import psycopg

from .errors import OutOfStock

_B32 = "abcdefghijklmnopqrstuvwxyz234567"


def new_public_id(prefix: str) -> str:
    return prefix + "_" + "".join(secrets.choice(_B32) for _ in range(12))


def create_order(conn: psycopg.Connection, customer_id: int, items: list[tuple[int, int, int]],
                 currency: str = "EUR") -> tuple[int, str]:
    public_id = new_public_id("ord")
    total = sum(qty * price for _, qty, price in items)
    order_id = conn.execute(
        "INSERT INTO orders (public_id, customer_id, status, total_cents, currency)"
        " VALUES (%s, %s, 'pending', %s, %s) RETURNING id",
        (public_id, customer_id, total, currency),
    ).fetchone()["id"]
    with conn.cursor() as cur:
        cur.executemany(
            "INSERT INTO order_items (order_id, product_id, quantity, unit_price_cents) VALUES (%s, %s, %s, %s)",
            [(order_id, pid, qty, price) for pid, qty, price in items],
        )
    return order_id, public_id


def reserve_stock(conn: psycopg.Connection, order_id: int, items: list[tuple[int, int]],
                  ttl: timedelta = timedelta(minutes=10)) -> None:
    expires = datetime.now(timezone.utc) + ttl
    for product_id, qty in items:
        cur = conn.execute("UPDATE products SET stock = stock - %s WHERE id = %s AND stock >= %s",
                           (qty, product_id, qty))
        if cur.rowcount == 0:
            row = conn.execute("SELECT sku, stock FROM products WHERE id = %s", (product_id,)).fetchone()
            raise OutOfStock(row["sku"], wanted=qty, available=row["stock"])
        conn.execute(
            "INSERT INTO stock_reservations (order_id, product_id, quantity, expires_at) VALUES (%s, %s, %s, %s)",
            (order_id, product_id, qty, expires),
        )


def release_expired(conn: psycopg.Connection, now: datetime | None = None) -> int:
    rows = conn.execute(
        "DELETE FROM stock_reservations WHERE expires_at <= %s RETURNING product_id, quantity",
        (now or datetime.now(timezone.utc),),
    ).fetchall()
    for r in rows:
        conn.execute("UPDATE products SET stock = stock + %s WHERE id = %s", (r["quantity"], r["product_id"]))
    return len(rows)


def confirm_reservation(conn: psycopg.Connection, order_id: int) -> None:
    conn.execute("DELETE FROM stock_reservations WHERE order_id = %s", (order_id,))


def release_order(conn: psycopg.Connection, order_id: int) -> None:
    rows = conn.execute("DELETE FROM stock_reservations WHERE order_id = %s RETURNING product_id, quantity",
                        (order_id,)).fetchall()
    for r in rows:
        conn.execute("UPDATE products SET stock = stock + %s WHERE id = %s", (r["quantity"], r["product_id"]))
    conn.execute("UPDATE orders SET status = 'failed', updated_at = now() WHERE id = %s", (order_id,))


def mark_paid(conn: psycopg.Connection, order_id: int) -> None:
    conn.execute("UPDATE orders SET status = 'paid', updated_at = now() WHERE id = %s", (order_id,))


def claim_paid_orders(conn: psycopg.Connection, worker: str, limit: int = 10) -> list[dict]:
    # SKIP LOCKED: concurrent workers each take different orders and never wait on each other.
    return conn.execute(
        """
        UPDATE orders SET claimed_by = %s, claimed_at = now(), updated_at = now()
        WHERE id IN (
            SELECT id FROM orders WHERE status = 'paid' AND claimed_by IS NULL
            ORDER BY created_at LIMIT %s FOR UPDATE SKIP LOCKED)
        RETURNING public_id, total_cents, currency
        """,
        (worker, limit),
    ).fetchall()


def mark_shipped(conn: psycopg.Connection, public_id: str, worker: str) -> bool:
    cur = conn.execute(
        "UPDATE orders SET status = 'shipped', updated_at = now()"
        " WHERE public_id = %s AND claimed_by = %s AND status = 'paid'",
        (public_id, worker),
    )
    return cur.rowcount == 1
'''))
    s.bot("""
`repo.py` is ported: `%s` placeholders, `RETURNING` instead of `lastrowid`, `DELETE ...
RETURNING` for releases, and two new functions for Northbeam: `claim_paid_orders` (FOR UPDATE
SKIP LOCKED) and `mark_shipped` (only the worker holding the claim can ship). For tests I'll
start a local PostgreSQL once per test session with `pg_ctl` into a temp dir and give each
test its own database, created from a template so it's fast.
""")
    s.call(write("tests/conftest.py", '''
import os
import subprocess
import tempfile
from itertools import count

import psycopg
import pytest
from psycopg.rows import dict_row

from orders import db

_ids = count()


@pytest.fixture(scope="session")
def pg_server():
    """A throwaway PostgreSQL on 127.0.0.1:54329 for the whole test session."""
    data = tempfile.mkdtemp(prefix="larkspur-pg-")
    subprocess.run(["initdb", "-D", data, "-U", "larkspur", "--auth=trust"], check=True, capture_output=True)
    subprocess.run(["pg_ctl", "-D", data, "-o", "-p 54329 -k /tmp", "-l", f"{data}/log", "-w", "start"],
                   check=True, capture_output=True)
    admin = "postgresql://larkspur@127.0.0.1:54329/postgres"
    with psycopg.connect(admin, autocommit=True) as c:
        c.execute("CREATE DATABASE tmpl")
    with psycopg.connect("postgresql://larkspur@127.0.0.1:54329/tmpl") as c:
        db.init_db(c)
    yield admin
    subprocess.run(["pg_ctl", "-D", data, "-m", "fast", "stop"], check=True, capture_output=True)


@pytest.fixture
def pg_dsn(pg_server):
    name = f"test_{next(_ids)}"
    with psycopg.connect(pg_server, autocommit=True) as c:
        c.execute(f"CREATE DATABASE {name} TEMPLATE tmpl")
    return f"postgresql://larkspur@127.0.0.1:54329/{name}"


@pytest.fixture
def pg(pg_dsn):
    with psycopg.connect(pg_dsn, row_factory=dict_row, autocommit=True) as c:
        yield c
'''))
    s.call(write("tests/test_fulfillment.py", '''
import threading

import psycopg
from psycopg.rows import dict_row

from orders import repo


def paid_orders(pg, n):
    pg.execute("INSERT INTO customers (public_id, email) VALUES ('cus_bbbbbbbbbbbb', 'b@example.com')")
    for i in range(n):
        pg.execute("INSERT INTO orders (public_id, customer_id, status, total_cents, currency)"
                   " VALUES (%s, 1, 'paid', 1650, 'EUR')", (f"ord_{i:012d}",))


def test_two_workers_never_claim_the_same_order(pg, pg_dsn):
    paid_orders(pg, 40)
    claimed = {"nb-1": [], "nb-2": []}

    def work(name):
        with psycopg.connect(pg_dsn, row_factory=dict_row, autocommit=True) as c:
            while batch := repo.claim_paid_orders(c, name, limit=3):
                claimed[name].extend(o["public_id"] for o in batch)

    threads = [threading.Thread(target=work, args=(n,)) for n in claimed]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(claimed["nb-1"] + claimed["nb-2"]) == [f"ord_{i:012d}" for i in range(40)]


def test_only_the_claiming_worker_can_ship(pg):
    paid_orders(pg, 1)
    [order] = repo.claim_paid_orders(pg, "nb-1")
    assert repo.mark_shipped(pg, order["public_id"], "nb-2") is False
    assert repo.mark_shipped(pg, order["public_id"], "nb-1") is True
'''), say="And the claim-queue test: two workers draining 40 paid orders must never overlap.")
    s.tool("run", {"command": "pytest -q"}, PG_TEST_FAIL, secs=9)
    s.bot("""
The ported code is fine. All five failures come from tests that still use SQLite's `?`
placeholders, which PostgreSQL reads as a syntax error: the `conn` fixture in
`tests/test_repo.py` (line 14, hence three setup errors), `setup_shop` in `conftest.py`,
and `tests/test_db.py`. I'll search the whole repo for any `?` left in SQL strings.
""")
    s.call(search(r"VALUES \([?]|= \?", ".", """
tests/test_repo.py:14:    pg.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES (?, ?, ?, ?)",
tests/conftest.py:61:    conn.execute("INSERT INTO customers (public_id, email, created_at) VALUES (?, ?, ?)", rows)
tests/conftest.py:64:    conn.execute("INSERT INTO products (sku, name, price_cents, stock) VALUES (?, ?, ?, ?)",
tests/test_db.py:9:    conn.execute("UPDATE products SET stock = stock - 2 WHERE sku = ?", ("ETH-YIRG-250",))
scripts/export_csv.py:22:    rows = conn.execute("SELECT public_id, total_cents FROM orders WHERE status = ? AND updated_at >= ?",
"""))
    s.bot("""
Five places. Four are in tests. The fifth is `scripts/export_csv.py`, the Northbeam CSV export,
which I haven't seen before. Did Tomás add it while you were away?
""")
    s.user("""
Yes, Tomás wrote it with a friend last week for the 17:00 export. Port it too, but keep it
working exactly as it is, he runs it by hand every evening until the Northbeam API is live.
""")
    s.tools(edit("tests/test_repo.py", "VALUES (?, ?, ?, ?)", "VALUES (%s, %s, %s, %s)"),
            edit("tests/conftest.py", "VALUES (?, ?, ?)\", rows)", "VALUES (%s, %s, %s)\", rows)"),
            edit("tests/conftest.py", "stock) VALUES (?, ?, ?, ?)", "stock) VALUES (%s, %s, %s, %s)"),
            edit("tests/test_db.py", "WHERE sku = ?", "WHERE sku = %s"),
            edit("scripts/export_csv.py", "WHERE status = ? AND updated_at >= ?", "WHERE status = %s AND updated_at >= %s"))
    s.tool("run", {"command": "pytest -q"}, """
.....................                                                    [100%]
19 passed in 4.12s
""", secs=6)
    s.tool("run", {"command": "for i in $(seq 50); do pytest tests/test_checkout.py tests/test_fulfillment.py -q -p no:cacheprovider > /tmp/pg_run_$i.log 2>&1 || echo \"run $i FAILED\"; done; echo \"$(grep -l '3 passed' /tmp/pg_run_*.log | wc -l)/50 passed\""}, """
50/50 passed
""", say="All green. Running the concurrency and claim tests 50 times, since they're the ones that can flake:", secs=187)
    s.bot("""
19 tests pass, and 50/50 runs of the drop test and the two-worker claim test. Interesting
detail: on PostgreSQL the drop test never sees a lock error at all, because buyers wait on the
product row lock for a few milliseconds, and the losers get a clean `OutOfStock` (ORD-201).
""")
    s.user("""
Show me the claim query plan, Ines said their worker polls every 5 seconds and I don't want
a seq scan over all orders every 5 seconds forever.
""")
    s.tool("run", {"command": "psql \"$(cat /run/secrets/larkspur-db)\" -c \"EXPLAIN ANALYZE SELECT id FROM orders WHERE status = 'paid' AND claimed_by IS NULL ORDER BY created_at LIMIT 10 FOR UPDATE SKIP LOCKED\""}, EXPLAIN_OUT, secs=2)
    s.bot("""
Index scan on the partial index `orders_paid_unclaimed_idx`, 0.09 ms. The index only covers
paid, unclaimed orders, so it stays small however many shipped orders pile up. Polling every
5 s costs nothing.
""")
    s.pause(48)
    s.user("Lunch done. Circuit breaker, then the staging copy.")
    s.call(write("orders/breaker.py", '''
"""Circuit breaker for the payment provider (ADR 0004): fail fast while Paystream is down."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from .errors import OrderError


class ProviderUnavailable(OrderError):
    code = "ORD-302"


class Breaker:
    def __init__(self, failures: int = 10, window: float = 30.0, cooldown: float = 15.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.failures, self.window, self.cooldown, self.clock = failures, window, cooldown, clock
        self._times: list[float] = []
        self._open_until = 0.0
        self._lock = threading.Lock()

    def check(self) -> None:
        with self._lock:
            if self.clock() < self._open_until:
                raise ProviderUnavailable("payment provider unavailable, try again shortly")

    def record(self, ok: bool) -> None:
        with self._lock:
            now = self.clock()
            if ok:
                self._times.clear()
                return
            self._times = [t for t in self._times if now - t <= self.window] + [now]
            if len(self._times) >= self.failures:
                self._open_until = now + self.cooldown
                self._times.clear()
'''))
    s.call(write("tests/test_breaker.py", '''
import pytest

from orders.breaker import Breaker, ProviderUnavailable


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_ten_failures_in_30s_open_the_breaker_for_15s():
    clock = Clock()
    b = Breaker(clock=clock)
    for _ in range(10):
        clock.now += 2
        b.record(ok=False)
    with pytest.raises(ProviderUnavailable):
        b.check()
    clock.now += 15.1
    b.check()


def test_a_success_resets_the_count():
    clock = Clock()
    b = Breaker(clock=clock)
    for i in range(19):
        b.record(ok=(i == 9))
    b.check()
'''))
    s.tool("run", {"command": "pytest -q tests/test_breaker.py"}, """
..                                                                       [100%]
2 passed in 0.02s
""", secs=2)
    s.bot("""
Breaker in place: 10 failures within 30 s open it for 15 s, during which `check()` raises
`ProviderUnavailable` (ORD-302), and a success resets the count. `PaymentsClient.charge` calls
`check()` before the retry loop and `record()` after it, so one checkout counts as one
outcome however many retries it took.

Now the staging copy. `scripts/copy_sqlite_to_pg.py` releases expired reservations on the
SQLite side first, copies table by table keeping the ids (`OVERRIDING SYSTEM VALUE`), resets
the identity sequences, and then compares row counts, total money, total stock and orders by
status.
""")
    s.tool("run", {"command": "python scripts/copy_sqlite_to_pg.py --from /var/lib/larkspur/staging/orders.db --to \"$(cat /run/secrets/larkspur-db)\" --check"}, COPY_OUT, secs=4)
    s.bot("""
Copy done in 1.4 s: 1,204 customers, 38 products, 2,314 orders, 3,977 items. Every check
matches: row counts, sum of `total_cents` 4,183,650 (EUR 41,836.50), stock 1,117 bags, and
orders per status. Staging now runs on PostgreSQL.
""")
    s.user("""
Sweet. Priya will point the staging replicas at it tonight and rerun k6 tomorrow. I'm done,
my brain is full.
""")
    s.bot("""
Good day's work. Done: schema v2, psycopg pool, repo ported, Northbeam claim queue with SKIP
LOCKED, circuit breaker, staging copied and verified, 21 tests green. Open: Priya's k6 rerun,
the Northbeam HTTP endpoints (claim / ship) for Ines, and the reconcile job.
""")
    return s


RECEIPT_TXT_OLD = '''
Subject: Order {{ order.public_id }} confirmed

Hi {{ customer.first_name }},

Thanks for your order!

{% for item in order.items %}{{ item.quantity }} x {{ item.name }}  {{ item.unit_price_cents }}
{% endfor %}
Total: {{ order.total_cents }} {{ order.currency }}

Larkspur Roasters
'''

RECEIPT_TXT_NEW = '''
Subject: Your Larkspur order {{ order.public_id }} is confirmed

Hi {{ customer.first_name }},

Thank you! We've received your payment and your coffee is reserved.

{% for item in order.items %}{{ item.quantity }} × {{ item.name }} ({{ item.sku }})  {{ item.unit_price_cents | money(order.currency) }}
{% endfor %}
Total paid: {{ order.total_cents | money(order.currency) }}

We roast on Mondays and Thursdays. Your bag leaves our roastery with Northbeam within
two working days; you'll get a tracking link when it ships.

Questions? Reply to this email and quote {{ order.public_id }}.

Tomás & the Larkspur crew
'''


def launch_prep() -> Session:
    """Thursday 19 March: the k6 rerun, receipt emails via an outbox, the release checklist."""
    s = Session("launch-prep", "2026-03-19T15:10:00")
    s.user("""
Priya reran k6 on staging last night. Pasting her summary: 250 checkouts/min for 6 min,
1,502 requests, 0 failed, p95 287 ms, max 3.9 s (those were the 429s waiting out
Retry-After). 38 charges rate-limited, all succeeded on retry. Breaker never opened.
""")
    s.bot("""
That's the result we needed: 0 of 1,502 failed, p95 287 ms against the 1.5 s threshold.
The 3.9 s maximum is the price of waiting out Retry-After instead of failing, and the page
shows "confirming payment..." after 2 s, so those customers aren't staring at nothing. I'll
attach the summary to the release notes.
""")
    s.user("""
New topic: the confirmation email. Tomás hates the current template ("looks like a
parking ticket"), and right now it's sent from inside checkout (I bolted that on Tuesday
night), which after the retry saga makes me nervous. Look at what we have.
""")
    s.tools(read("templates/receipt.txt.j2", RECEIPT_TXT_OLD),
            search("send_receipt", "orders/", """
orders/checkout.py:47:        mail.send_receipt(conn, order_id)
orders/mail.py:18:def send_receipt(conn, order_id: int) -> None:
"""))
    s.bot("""
Two issues:
1. **Where it's sent**: `checkout()` calls `mail.send_receipt` right after `mark_paid`. If the
   SMTP relay is slow, the customer's checkout is slow. If it fails, checkout raises although
   the payment went through. Email shouldn't be on the checkout path at all.
2. **The template** prints raw cents ("Total: 2900 EUR") and has nothing about shipping.

For 1, I'd use an outbox: in the same transaction as `mark_paid`, insert a row into
`email_outbox`. A small sender loop claims rows with `FOR UPDATE SKIP LOCKED` (same trick as
the Northbeam queue), sends, and stamps `sent_at`. A failed send stays in the outbox and is
tried again on the next loop; no email is lost and checkout never waits. Since "sent" and
"stamped" aren't atomic, a crash in between could send one email twice. That's acceptable
for receipts, and the outbox row id goes into the `Message-ID` header so duplicates are
recognizable.
""")
    s.user("""
Outbox, yes. And a duplicate receipt is fine, Tomás would rather send two than zero.
For the template, Tomás sent me wording. Roughly: thank you, payment received, coffee
reserved, list items with SKUs, total in euros properly formatted, roast days Monday and
Thursday, ships with Northbeam within two working days, reply with the order number for
questions. Signed "Tomás & the Larkspur crew".
""")
    s.tools(write("templates/receipt.txt.j2", RECEIPT_TXT_NEW), write("orders/money.py", '''
"""Formatting integer cents for people. Storage stays integer cents (CONTRIBUTING.md)."""

from __future__ import annotations

_SYMBOLS = {"EUR": "€", "USD": "$", "GBP": "£"}


def money(cents: int, currency: str = "EUR") -> str:
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    symbol = _SYMBOLS.get(currency)
    amount = f"{whole:,}.{frac:02d}"
    return f"{sign}{symbol}{amount}" if symbol else f"{sign}{amount} {currency}"
'''), say="The template with Tomás's wording, and a `money` filter so cents never reach a human:")
    s.user("""
Hmm, Tomás is in Germany, customers are mostly German and Dutch. Don't they write 29,00 €?
""")
    s.bot("""
They do: German and Dutch write `29,00 €`, with a comma for decimals and the symbol after
the amount. Options:
1. Format by the customer's locale with Babel (`format_currency(2900, 'EUR', locale='de_DE')`).
   Correct everywhere, but it's a new dependency and we don't store customer locales yet.
2. Fixed German format for everything, since the shop and most customers are German.

For launch I'd take option 2 with a `LARKSPUR_MONEY_STYLE=de` setting, and move to Babel once
there's a locale on the customer record. Your call.
""")
    s.user("Option 2 for launch. Put Babel in the backlog.")
    s.call(write("orders/money.py", '''
"""Formatting integer cents for people. Storage stays integer cents (CONTRIBUTING.md).

Launch uses one German style for everyone ("1.234,50 €"); per-customer locales
(Babel) are in the backlog.
"""

from __future__ import annotations


def money(cents: int, currency: str = "EUR") -> str:
    sign = "-" if cents < 0 else ""
    whole, frac = divmod(abs(cents), 100)
    grouped = f"{whole:,}".replace(",", ".")
    symbol = "€" if currency == "EUR" else currency
    return f"{sign}{grouped},{frac:02d} {symbol}"
'''))
    s.call(write("tests/test_money.py", '''
import pytest

from orders.money import money


@pytest.mark.parametrize("cents, text", [
    (2900, "29,00 €"),
    (5, "0,05 €"),
    (123450, "1.234,50 €"),
    (-1450, "-14,50 €"),
])
def test_money_uses_german_style(cents, text):
    assert money(cents) == text


def test_other_currencies_show_their_code():
    assert money(1000, "CHF") == "10,00 CHF"
'''))
    s.call(write("orders/outbox.py", '''
"""Email outbox: checkout enqueues in its own transaction; a sender loop delivers."""

from __future__ import annotations

import psycopg


def enqueue_receipt(conn: psycopg.Connection, order_id: int) -> None:
    conn.execute("INSERT INTO email_outbox (order_id, kind) VALUES (%s, 'receipt')", (order_id,))


def claim(conn: psycopg.Connection, limit: int = 20) -> list[dict]:
    return conn.execute(
        """
        SELECT id, order_id, kind, attempts FROM email_outbox
        WHERE sent_at IS NULL AND next_try_at <= now()
        ORDER BY id LIMIT %s FOR UPDATE SKIP LOCKED
        """,
        (limit,),
    ).fetchall()


def mark_sent(conn: psycopg.Connection, outbox_id: int) -> None:
    conn.execute("UPDATE email_outbox SET sent_at = now() WHERE id = %s", (outbox_id,))


def mark_failed(conn: psycopg.Connection, outbox_id: int, attempts: int) -> None:
    # Back off per row (1, 2, 4 ... minutes, at most an hour); the row is never dropped.
    conn.execute(
        "UPDATE email_outbox SET attempts = %s, next_try_at = now() + least(interval '1 hour',"
        " interval '1 minute' * power(2, %s)) WHERE id = %s",
        (attempts + 1, attempts, outbox_id),
    )
'''))
    s.tools(edit("orders/schema_pg.sql", "CREATE INDEX orders_customer_idx", '''CREATE TABLE email_outbox (
    id           BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    order_id     BIGINT NOT NULL REFERENCES orders(id),
    kind         TEXT NOT NULL CHECK (kind IN ('receipt', 'shipped')),
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_try_at  TIMESTAMPTZ NOT NULL DEFAULT now(),
    sent_at      TIMESTAMPTZ,
    created_at   TIMESTAMPTZ NOT NULL DEFAULT now()
);

CREATE INDEX email_outbox_due_idx ON email_outbox (next_try_at) WHERE sent_at IS NULL;
CREATE INDEX orders_customer_idx'''),
            edit("orders/checkout.py", '''        repo.mark_paid(conn, order_id)
    mail.send_receipt(conn, order_id)''', '''        repo.mark_paid(conn, order_id)
        outbox.enqueue_receipt(conn, order_id)  # delivered by the sender loop, never inline'''),
            say="Adding the table and moving the send out of checkout:")
    s.tool("run", {"command": "pytest -q"}, """
..............................                                           [100%]
30 passed in 5.08s
""", secs=7)
    s.bot("""
30 passed (new: the money filter, the outbox claim and retry backoff, and a checkout test that
asserts no SMTP connection is opened during checkout). The sender loop runs as its own systemd
unit, `larkspur-mailer`, so Priya can restart it without touching the API.
""")
    s.user("""
Good. Last thing today: a release checklist for tomorrow. Launch is 12:00 CET with the spring
preview lot. I'm on call 11:00-14:00, Priya on standby, Tomás watches the shop front.
""")
    s.call(write("docs/release-checklist.md", """
# Launch checklist: Friday 20 March 2026, drop at 12:00 CET

## Thursday evening
- [ ] tag v1.0.0; CI green (30 tests, drop test 50x)
- [ ] production database: schema v2 applied, products and stock loaded, stock checked
      against the roastery's count sheet (Tomás)
- [ ] secrets in the vault: shop/larkspur/paystream (live token), shop/larkspur/postgres
- [ ] larkspur-orders@1, larkspur-orders@2 and larkspur-mailer running; health checks green
- [ ] Shopify plugin: stock of every drop SKU set to 0 so it cannot sell them

## Friday
- 10:30 smoke test on production: one real order for 1 x ETH-YIRG-250, refund it afterwards
- 11:00 Dana on call (until 14:00), Priya on standby, Tomás on the shop front
- 11:45 dashboards open: checkout_paid rate, charge_retry, breaker state, p95 latency
- 12:00 drop goes live
- 12:30 first count: paid orders vs stock sold must match exactly

## Rollback
- if checkout error rate > 2 % for 5 minutes: put the shop in "drop paused" mode (banner, no new
  checkouts), investigate; paid orders are safe in PostgreSQL
- Paystream down (breaker open for more than 5 minutes): pause the drop and announce it
  on the mailing list; do not switch payment providers mid-drop
"""))
    s.bot("""
The checklist is in `docs/release-checklist.md`: Thursday evening steps, the Friday timeline
(smoke test at 10:30 with a real order that gets refunded, the drop at 12:00, a stock count
at 12:30) and two rollback triggers: checkout errors above 2 % for 5 minutes, or the breaker
open for more than 5 minutes.
""")
    s.user("""
One thing Tomás asked for: a 'notify me when it's back' list for sold-out lots. Not for
launch! Just note it. Also Babel. And Wei's idempotency lookup question.
""")
    s.call(write("docs/backlog.md", """
# Backlog (after launch)

- "Notify me" list for sold-out lots (Tomás): email opt-in per SKU, sent through the outbox.
- Per-customer money formatting with Babel once customers have a locale (launch: German style).
- Ask Wei Zhang whether Paystream can look up a charge by Idempotency-Key (see payments.py TODO);
  until then the reconcile job re-POSTs with the same key.
- Northbeam HTTP endpoints for claim / ship: Ines Duarte's worker goes live Monday 23 March.
- Retire Tomás's 17:00 CSV export once the Northbeam worker is live.
"""))
    s.bot("""
Noted in `docs/backlog.md`: the notify-me list (through the outbox, so no new moving parts),
Babel, Wei's lookup question, the Northbeam endpoints for Ines (go-live Monday 23 March),
and retiring the CSV export after that.
""")
    s.user("""
That's it. Honestly two weeks ago I'd have bet we'd ship on the Shopify plugin again.
See you tomorrow at 11.
""")
    s.bot("""
See you at 11. The smoke test at 10:30 is the first item on the list. Good luck with the drop.
""")
    return s


SESSIONS = (kickoff, payments, bug_hunt, load_test, postgres_day, launch_prep)

if __name__ == "__main__":
    sys.exit(main())
