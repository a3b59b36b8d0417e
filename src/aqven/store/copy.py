"""Copy a project's whole record from one store to another (SQLite ↔ PostgreSQL), and prove the copy whole.

Every table is read in one read transaction of the source (one consistent state, even while a server writes) and
written in one transaction of the target, which must hold no record yet. Each table's rows are then digested on
both sides, in primary-key order, with values in one canonical form (an integer is an integer, a REAL the same
double on both backends), so equal digests mean the same rows, whichever backend holds them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from aqven.errors import STORE_NOT_EMPTY, AqvenError
from aqven.store.db import Database, Reader

#: The tables of the record and the columns that order them, parents before children.
TABLES: tuple[tuple[str, str], ...] = (
    ("series", "id"),
    ("attempts", "series_id, idx"),
    ("runs", "id"),
    ("events", "run_id, seq"),
    ("human_answers", "run_id, node_id"),
    ("approvals", "series_id, seq"),
    ("series_cells", "series_id, side, variant_id, case_name, status, outcome"),
    ("series_costs", "series_id, side, variant_id, cost_usd"),
    ("series_seq", "series_id"),
)
_CHUNK = 1000


@dataclass(frozen=True)
class TableCopy:
    """One table after a copy: its rows on each side and their digests."""

    table: str
    rows: int
    source_digest: str
    target_digest: str
    target_rows: int

    @property
    def same(self) -> bool:
        return self.rows == self.target_rows and self.source_digest == self.target_digest


def _columns(reader: Reader, table: str) -> list[str]:
    cur = reader.execute(f"SELECT * FROM {table} WHERE 1=0")
    names = [d[0] for d in cur.description]
    cur.close()
    return names


def _rows(reader: Reader, table: str, order: str, columns: list[str]) -> Iterator[tuple[Any, ...]]:
    cur = reader.tuples()
    yield from cur.execute(f"SELECT {', '.join(columns)} FROM {table} ORDER BY {order}")


def _canonical(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, float):
        return value.hex()  # exact: the same double reads the same
    return value


def table_digest(reader: Reader, table: str, order: str, columns: list[str]) -> tuple[int, str]:
    """(rows, sha256) of a table, its columns in the order given, its rows in primary-key order."""
    digest = hashlib.sha256()
    count = 0
    for row in _rows(reader, table, order, columns):
        digest.update(json.dumps([_canonical(v) for v in row], ensure_ascii=False).encode())
        digest.update(b"\n")
        count += 1
    return count, f"sha256:{digest.hexdigest()}"


def copy_store(source: Database, target: Database) -> list[TableCopy]:
    """Copy every table of `source` into `target` (which must hold no series and no run), then digest both."""
    with target.reading() as reader:
        held = [t for t, _ in TABLES if reader.execute(f"SELECT 1 FROM {t} LIMIT 1").fetchone() is not None]
    if held:
        raise AqvenError(
            f"the target store {target.location} already holds a record ({', '.join(held)})",
            code=STORE_NOT_EMPTY,
            hint="copy into an empty database (createdb NAME) or a new SQLite file",
        )
    with source.reading() as reader:
        columns = {table: _columns(reader, table) for table, _ in TABLES}
        with target.transaction() as cur:
            for table, order in TABLES:
                names = columns[table]
                sql = f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join('?' for _ in names)})"
                chunk: list[tuple[Any, ...]] = []
                for row in _rows(reader, table, order, names):
                    chunk.append(tuple(row))
                    if len(chunk) >= _CHUNK:
                        cur.executemany(sql, chunk)
                        chunk = []
                if chunk:
                    cur.executemany(sql, chunk)
        digests = {table: table_digest(reader, table, order, columns[table]) for table, order in TABLES}
    out = []
    with target.reading() as reader:
        for table, order in TABLES:
            rows, source_digest = digests[table]
            target_rows, target_digest = table_digest(reader, table, order, columns[table])
            out.append(TableCopy(table, rows, source_digest, target_digest, target_rows))
    return out
