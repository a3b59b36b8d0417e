"""What the server and its workers share: the DBOS queue and workflow, the workflow id of an attempt, and how an
attempt's end is announced.

An attempt is one DBOS workflow with no step (`WORKFLOW`, args: series id, attempt index, run id): the durable
record of what it did is the store's (its run, trace and row, written by `run_owned` as in one process); DBOS holds
who has it, and hands it to another worker when its executor is declared lost. Its workflow id is the attempt's
(`workflow_id`): enqueueing it again is a no-op (DBOS returns the existing workflow). A worker announces each end on
`CHANNEL` (`<workflow id> <state>`), which the server LISTENs to; the workflow's output is the same state, which the
server reads when a notification may have been missed.
"""

from __future__ import annotations

import json
import os
from decimal import Decimal
from typing import Any

import aqven

APP = "aqven"
QUEUE = "aqven_attempts"
WORKFLOW = "aqven_attempt"
CHANNEL = "aqven_attempt_end"
VERSION = f"aqven-{aqven.__version__}"
"""DBOS's application version: every worker of one AQVEN release runs the others' workflows (recovery is by it)."""

# The states an attempt's workflow ends in (its output, and the word after its id on CHANNEL).
DONE, WAITING, SKIPPED, REFUSED, ERROR = "done", "waiting", "skipped", "refused", "error"

CLUSTER_ENV = "AQVEN_CLUSTER"
"""1: the server hands attempts to `aqven worker`s (set by `aqven serve --cluster`)."""

WAKE = "aqven_attempts_queued"
"""The channel the server wakes its workers on while it hands out attempts (node.py: they poll often for a while)."""

POLL_S = float(os.environ.get("AQVEN_CLUSTER_POLL_S", "0.025"))
"""The queue's polling interval in DBOS: how often a woken worker looks at the queue (the server sets it on the
queue's row). 0.025 s against 0.05 s, back to back (bench/perf/cluster.py series, 2 cores, quiet): 1,000 instant
attempts on 2 workers 159/s against 118/s at the same CPU per attempt (9.0 against 9.3 ms); 2,000 × 1 s on 3 workers
at concurrency 64 1.109× the ideal against 1.116×, for 14.7 against 12.2 ms of CPU an attempt (more polls while
attempts run); idle unchanged (an idle worker polls once every IDLE_POLL_S). Each hot worker's poll is a transaction:
with many workers, a longer interval (AQVEN_CLUSTER_POLL_S on the server) spares PostgreSQL."""
IDLE_POLL_S = 1.0
"""How often a worker that was not woken lately looks all the same (a wake-up it missed costs at most this)."""


DBOS_LIMIT = os.environ.get("AQVEN_CLUSTER_DBOS_LIMIT", "") not in ("", "0")
"""Give the queue DBOS's own global concurrency (= the project's `concurrency`) on top of the runner's. Off by
default: the runner never has more than `concurrency` attempts out, and DBOS's limit made every hand-out wait a poll
or more (a finished attempt counts until DBOS records its end, after the server heard it; and a shared budget makes
each dequeue a REPEATABLE READ transaction whose conflicts between workers double their polling interval). Figures:
docs/architecture.md ("Attempts on several machines")."""


def cluster_wanted() -> bool:
    return os.environ.get(CLUSTER_ENV, "") not in ("", "0")


def workflow_id(series_id: str, idx: int, run_id: str, attempt: int = 0) -> str:
    """The attempt's workflow id: one per attempt and run (a rate-limited attempt run again at the end has a new run,
    so a new workflow); `attempt` > 0 for a hand-out again after a refusal or a workflow that ended without writing
    the attempt's end."""
    base = f"{series_id}:{idx}:{run_id}"
    return base if attempt == 0 else f"{base}+{attempt}"


def sa_url(dsn: str) -> str:
    """The store's DSN as SQLAlchemy (DBOS) wants it: on psycopg 3, which the store uses too."""
    for prefix in ("postgresql://", "postgres://"):
        if dsn.startswith(prefix):
            return "postgresql+psycopg://" + dsn[len(prefix) :]
    return dsn


def migrate(dsn: str) -> None:
    """Create or bring up to date DBOS's own tables (schema `dbos`) in the store's database (idempotent)."""
    from dbos import DBOS

    DBOS.migrate(sa_url(dsn))


def ended_payload(out: Any) -> str:
    """What the server's runner counts of a finished attempt (research/series/attempt.AttemptResult), after its state
    on CHANNEL: its outcome, cost and tokens (a notification carries up to 8,000 bytes; this is under 200)."""
    return json.dumps(
        {"outcome": out.outcome, "cost": str(out.cost), "tokens": out.tokens, "unpriced": out.unpriced},
        separators=(",", ":"),
    )


def read_ended(text: str) -> dict[str, Any] | None:
    try:
        data = json.loads(text)
        data["cost"] = Decimal(data["cost"])
    except (ValueError, KeyError, TypeError, ArithmeticError):
        return None
    return data if isinstance(data, dict) else None
