"""A test's own access to a project's store, on whichever backend the project uses (`store_of`): rows read, a
write made behind the server's back (what an agent with the database could do), and where a secret would be stored.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from aqven.store.location import store_of
from aqven.store.open import project_database


def on_postgres(root: Path) -> bool:
    return store_of(root).backend == "postgresql"


def write(root: Path, sql: str, params: tuple[Any, ...] = ()) -> int:
    """Run one write on a connection of the test's own, committed; the rows it changed."""
    database = project_database(root)
    try:
        with database.transaction() as cur:
            return cur.execute(sql, params).rowcount
    finally:
        database.close()


def one(root: Path, sql: str, params: tuple[Any, ...] = ()) -> Any:
    """The first row of a read on a connection of the test's own (what the server committed)."""
    database = project_database(root)
    try:
        with database.reading() as conn:
            return conn.execute(sql, params).fetchone()
    finally:
        database.close()


def places_holding(root: Path, secret: str) -> list[str]:
    """Where in the project's store `secret` is written: on SQLite the files of `.aqven` (the database, its WAL and
    everything else there) whose bytes hold it; on PostgreSQL the tables one of whose rows, as text, holds it."""
    if not on_postgres(root):
        files = [p for p in (root / ".aqven").rglob("*") if p.is_file()]
        assert any(p.name == "aqven.sqlite" for p in files), "no store in .aqven"
        return [str(p) for p in files if secret.encode() in p.read_bytes()]
    database = project_database(root)
    try:
        with database.reading() as conn:
            tables = [
                r[0]
                for r in conn.execute(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
                ).fetchall()
            ]
            assert "attempts" in tables, "no store in this database"
            return [
                t
                for t in tables
                if conn.execute(
                    f'SELECT 1 FROM "{t}" r WHERE strpos(CAST(r AS TEXT), ?) > 0 LIMIT 1', (secret,)
                ).fetchone()
                is not None
            ]
    finally:
        database.close()
