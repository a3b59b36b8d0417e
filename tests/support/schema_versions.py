"""Taking a test database back to what an older release wrote, one schema version at a time."""

from __future__ import annotations

from typing import Any

# Version 10 (issue 27): who acted, and the proof.
VERSION_10_COLUMNS = (
    ("approvals", "person"),
    ("approvals", "proof"),
    ("human_answers", "channel"),
    ("human_answers", "confirmed"),
    ("human_answers", "person"),
    ("human_answers", "proof"),
)


def back_before_version_12(cur: Any) -> None:
    """Version 12 (issue 31): the providers' limits and outage clocks shared by every process of a store."""
    cur.execute("DROP TABLE provider_calls")
    cur.execute("DROP TABLE provider_outages")
    cur.execute("DELETE FROM schema_version WHERE version>=12")


def back_before_version_11(cur: Any) -> None:
    """Version 11 (issue 31): the workers table and the worker an attempt ran on."""
    back_before_version_12(cur)
    cur.execute("DROP TABLE workers")
    cur.execute("ALTER TABLE attempts DROP COLUMN worker")
    cur.execute("DELETE FROM schema_version WHERE version>=11")


def back_before_version_10(cur: Any) -> None:
    back_before_version_11(cur)
    for table, column in VERSION_10_COLUMNS:
        cur.execute(f"ALTER TABLE {table} DROP COLUMN {column}")
    cur.execute("DELETE FROM schema_version WHERE version>=10")
