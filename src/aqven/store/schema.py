"""The one definition of the project database's schema, for SQLite and PostgreSQL alike.

Each migration is written once, in the SQL both backends share; `postgres_statements` turns it into PostgreSQL's
(types, `WITHOUT ROWID`, text ordered byte by byte as SQLite orders it). Only the tallies' trigger (migrations 8
and 9) is written twice: a trigger body is the one thing the two dialects share nothing of. Why a small dialect
layer and not SQLAlchemy with Alembic: docs/architecture.md ("The store on two backends").
"""

from __future__ import annotations

import re
import sqlite3

from aqven.errors import DB_SCHEMA_NEWER, AqvenError

SCHEMA_VERSION = 12

MIGRATIONS: dict[int, str] = {
    1: """
    CREATE TABLE runs (
        id TEXT PRIMARY KEY,
        flow_id TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        started_at TEXT,
        ended_at TEXT,
        request TEXT NOT NULL,
        output TEXT,
        error_code TEXT,
        error_message TEXT,
        outcome TEXT,
        input_tokens INTEGER NOT NULL DEFAULT 0,
        output_tokens INTEGER NOT NULL DEFAULT 0,
        cost_usd TEXT NOT NULL DEFAULT '0',
        unpriced_calls INTEGER NOT NULL DEFAULT 0,
        model_calls INTEGER NOT NULL DEFAULT 0,
        simulated INTEGER NOT NULL DEFAULT 0,
        series_id TEXT,
        case_name TEXT,
        dataset_id TEXT
    );
    CREATE INDEX runs_created ON runs(created_at);
    CREATE INDEX runs_series ON runs(series_id);
    CREATE TABLE events (
        run_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        ts TEXT NOT NULL,
        kind TEXT NOT NULL,
        node_id TEXT,
        data TEXT NOT NULL,
        PRIMARY KEY (run_id, seq)
    );
    CREATE TABLE human_answers (
        run_id TEXT NOT NULL,
        node_id TEXT NOT NULL,
        answer TEXT NOT NULL,
        answered_at TEXT NOT NULL,
        PRIMARY KEY (run_id, node_id)
    );
    """,
    2: """
    CREATE TABLE series (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        experiment_id TEXT,
        on_side TEXT NOT NULL,
        status TEXT NOT NULL,
        created_at TEXT NOT NULL,
        ended_at TEXT,
        client_op_id TEXT UNIQUE,
        plan TEXT NOT NULL,
        cap_usd TEXT NOT NULL,
        project_cap_usd TEXT NOT NULL,
        project_cap_source TEXT NOT NULL,
        pause TEXT,
        verdict TEXT,
        error TEXT,
        stop_reason TEXT,
        inputs_hash TEXT NOT NULL,
        inputs TEXT NOT NULL,
        simulated INTEGER NOT NULL DEFAULT 0,
        finding TEXT,
        active_seconds REAL NOT NULL DEFAULT 0,
        active_since REAL
    );
    CREATE INDEX series_experiment ON series(experiment_id, created_at);
    CREATE TABLE attempts (
        series_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        case_name TEXT NOT NULL,
        dataset_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        rep INTEGER NOT NULL,
        seed INTEGER NOT NULL,
        status TEXT NOT NULL DEFAULT 'queued',
        run_id TEXT,
        outcome TEXT,
        value REAL,
        error_code TEXT,
        error_message TEXT,
        checks TEXT,
        cost_usd TEXT,
        unpriced INTEGER NOT NULL DEFAULT 0,
        reruns INTEGER NOT NULL DEFAULT 0,
        started_at TEXT,
        ended_at TEXT,
        active_at_end REAL,
        PRIMARY KEY (series_id, idx)
    );
    CREATE INDEX attempts_status ON attempts(series_id, status);
    """,
    # Everything a series snapshot adds up, in one covering index ordered as it groups (store/series_tally.py).
    3: """
    CREATE INDEX attempts_tally ON attempts(
        series_id, variant_id, case_name, status, outcome, value, reruns, unpriced, active_at_end, cost_usd
    );
    """,
    # Sealed evidence (issue 12): the run order's secret seed and the simulators' seed of a series, the coarse
    # view a held-out series shows while it runs, the inputs each attempt ran on, and the side every run ran on
    # (a run of a series takes its attempt's side; a run by hand stays unknown, which counts as held out).
    4: """
    ALTER TABLE series ADD COLUMN order_seed INTEGER;
    ALTER TABLE series ADD COLUMN sim_seed INTEGER;
    ALTER TABLE series ADD COLUMN sealed_view TEXT;
    ALTER TABLE attempts ADD COLUMN inputs_hash TEXT;
    ALTER TABLE runs ADD COLUMN side TEXT;
    UPDATE runs SET side = (
        SELECT a.side FROM attempts a WHERE a.series_id = runs.series_id AND a.case_name = runs.case_name LIMIT 1
    ) WHERE series_id IS NOT NULL;
    """,
    # Every approval and stop of a series, with the channel a person gave it through (store/approvals.py).
    5: """
    CREATE TABLE approvals (
        series_id TEXT NOT NULL,
        seq INTEGER NOT NULL,
        at TEXT NOT NULL,
        action TEXT NOT NULL,
        channel TEXT NOT NULL,
        confirmed TEXT,
        old_cap_usd TEXT NOT NULL,
        new_cap_usd TEXT,
        spent_usd TEXT,
        reason TEXT,
        PRIMARY KEY (series_id, seq)
    );
    """,
    # Studio's runs list shows each run's attempt outcome (a check can fail on a run that ended "ok").
    6: """
    CREATE INDEX attempts_run ON attempts(series_id, run_id);
    """,
    # A series' token cap (the smallest token_cap of its agents: a bound when nothing prices a model), and the
    # token caps an approval raised (issue 15).
    7: """
    ALTER TABLE series ADD COLUMN token_cap INTEGER;
    ALTER TABLE approvals ADD COLUMN old_token_cap INTEGER;
    ALTER TABLE approvals ADD COLUMN new_token_cap INTEGER;
    """,
    # A series' tallies kept as its attempts change (store/series_tally.py reads them instead of grouping the
    # attempts): one row per series, side, variant, case, status and outcome ('' for none), and the count of each
    # recorded cost (TEXT, added exactly in Python). The trigger sees every write to an attempt's tallied
    # columns; SeriesStore.create adds a new series' queued cells in one statement. The grouped scan's covering
    # index (version 3) goes: nothing reads it any more, and every attempt's writes paid for it.
    8: """
    CREATE TABLE series_cells (
        series_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        case_name TEXT NOT NULL,
        status TEXT NOT NULL,
        outcome TEXT NOT NULL,
        n INTEGER NOT NULL,
        reruns INTEGER NOT NULL,
        v REAL NOT NULL,
        unpriced INTEGER NOT NULL,
        ends INTEGER NOT NULL,
        PRIMARY KEY (series_id, side, variant_id, case_name, status, outcome)
    ) WITHOUT ROWID;
    CREATE TABLE series_costs (
        series_id TEXT NOT NULL,
        side TEXT NOT NULL,
        variant_id TEXT NOT NULL,
        cost_usd TEXT NOT NULL,
        n INTEGER NOT NULL,
        PRIMARY KEY (series_id, side, variant_id, cost_usd)
    ) WITHOUT ROWID;
    CREATE INDEX attempts_ends ON attempts(series_id, active_at_end, side);
    INSERT INTO series_cells
        SELECT series_id, side, variant_id, case_name, status, COALESCE(outcome, ''), COUNT(*), SUM(reruns),
            SUM(COALESCE(value, 0)), SUM(unpriced), COUNT(active_at_end)
        FROM attempts GROUP BY 1, 2, 3, 4, 5, 6;
    INSERT INTO series_costs
        SELECT series_id, side, variant_id, cost_usd, COUNT(*) FROM attempts WHERE cost_usd IS NOT NULL
        GROUP BY 1, 2, 3, 4;
    DROP INDEX attempts_tally;
    CREATE TRIGGER attempts_cells
    AFTER UPDATE OF series_id, side, variant_id, case_name, status, outcome, value, reruns, unpriced, cost_usd,
        active_at_end ON attempts
    BEGIN
    INSERT INTO series_cells VALUES (
        OLD.series_id, OLD.side, OLD.variant_id, OLD.case_name, OLD.status, COALESCE(OLD.outcome, ''),
        -1, -OLD.reruns, -COALESCE(OLD.value, 0), -OLD.unpriced, -(OLD.active_at_end IS NOT NULL)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends;
    INSERT INTO series_costs SELECT OLD.series_id, OLD.side, OLD.variant_id, OLD.cost_usd, -1
        WHERE OLD.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;
    INSERT INTO series_cells VALUES (
        NEW.series_id, NEW.side, NEW.variant_id, NEW.case_name, NEW.status, COALESCE(NEW.outcome, ''),
        1, NEW.reruns, COALESCE(NEW.value, 0), NEW.unpriced, (NEW.active_at_end IS NOT NULL)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends;
    INSERT INTO series_costs SELECT NEW.series_id, NEW.side, NEW.variant_id, NEW.cost_usd, 1
        WHERE NEW.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n;
    END;
    """,
    # A change sequence on the kept tallies (store/series_tally.py KeptTally): every update of an attempt's
    # tallied columns takes the next number of its series' counter (series_seq), and the cells and costs rows it
    # changes carry it, so a reader that kept the tallies in memory reads only the rows changed since its last
    # read (along the seq indexes) instead of every cell of the series. The finished attempts that hit a rate
    # limit and run again at the end are indexed apart: a stop_early snapshot reads them (research/series/early.py).
    9: """
    CREATE TABLE series_seq (series_id TEXT PRIMARY KEY, n INTEGER NOT NULL) WITHOUT ROWID;
    ALTER TABLE series_cells ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    ALTER TABLE series_costs ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
    CREATE INDEX series_cells_seq ON series_cells(series_id, seq);
    CREATE INDEX series_costs_seq ON series_costs(series_id, seq);
    CREATE INDEX attempts_rate_limited ON attempts(series_id, case_name)
        WHERE status='done' AND error_code='PROVIDER_RATE_LIMITED' AND reruns=0;
    DROP TRIGGER attempts_cells;
    CREATE TRIGGER attempts_cells
    AFTER UPDATE OF series_id, side, variant_id, case_name, status, outcome, value, reruns, unpriced, cost_usd,
        active_at_end ON attempts
    BEGIN
    INSERT INTO series_seq VALUES (OLD.series_id, 1) ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO series_seq SELECT NEW.series_id, 1 WHERE NEW.series_id IS NOT OLD.series_id
        ON CONFLICT DO UPDATE SET n = n + 1;
    INSERT INTO series_cells VALUES (
        OLD.series_id, OLD.side, OLD.variant_id, OLD.case_name, OLD.status, COALESCE(OLD.outcome, ''),
        -1, -OLD.reruns, -COALESCE(OLD.value, 0), -OLD.unpriced, -(OLD.active_at_end IS NOT NULL),
        (SELECT n FROM series_seq WHERE series_id = OLD.series_id)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends, seq = excluded.seq;
    INSERT INTO series_costs SELECT OLD.series_id, OLD.side, OLD.variant_id, OLD.cost_usd, -1,
        (SELECT n FROM series_seq WHERE series_id = OLD.series_id)
        WHERE OLD.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n, seq = excluded.seq;
    INSERT INTO series_cells VALUES (
        NEW.series_id, NEW.side, NEW.variant_id, NEW.case_name, NEW.status, COALESCE(NEW.outcome, ''),
        1, NEW.reruns, COALESCE(NEW.value, 0), NEW.unpriced, (NEW.active_at_end IS NOT NULL),
        (SELECT n FROM series_seq WHERE series_id = NEW.series_id)
    ) ON CONFLICT DO UPDATE SET n = n + excluded.n, reruns = reruns + excluded.reruns, v = v + excluded.v,
        unpriced = unpriced + excluded.unpriced, ends = ends + excluded.ends, seq = excluded.seq;
    INSERT INTO series_costs SELECT NEW.series_id, NEW.side, NEW.variant_id, NEW.cost_usd, 1,
        (SELECT n FROM series_seq WHERE series_id = NEW.series_id)
        WHERE NEW.cost_usd IS NOT NULL ON CONFLICT DO UPDATE SET n = n + excluded.n, seq = excluded.seq;
    END;
    """,
    # Who acted, and the proof that a person did (issue 27): the person's name, and for a passkey the assertion
    # with what it was bound to (people/passkeys.py), so the act can be verified again later. A human node's answer
    # records the same.
    10: """
    ALTER TABLE approvals ADD COLUMN person TEXT;
    ALTER TABLE approvals ADD COLUMN proof TEXT;
    ALTER TABLE human_answers ADD COLUMN channel TEXT;
    ALTER TABLE human_answers ADD COLUMN confirmed TEXT;
    ALTER TABLE human_answers ADD COLUMN person TEXT;
    ALTER TABLE human_answers ADD COLUMN proof TEXT;
    """,
    # Workers on several machines (issue 31, `aqven worker`): one row per worker process's life (`id` is its DBOS
    # executor id, new at each start), its heartbeat as a counter the server watches on its own clock (no clock is
    # compared across machines), what it refused; and on each attempt, the worker that ran it last.
    11: """
    CREATE TABLE workers (
        id TEXT PRIMARY KEY,
        name TEXT NOT NULL,
        host TEXT NOT NULL,
        pid INTEGER NOT NULL,
        slots INTEGER NOT NULL,
        running INTEGER NOT NULL DEFAULT 0,
        state TEXT NOT NULL,
        started_at TEXT NOT NULL,
        beat_at TEXT NOT NULL,
        beats INTEGER NOT NULL DEFAULT 0,
        ran INTEGER NOT NULL DEFAULT 0,
        inputs_hash TEXT,
        error_code TEXT,
        error_message TEXT,
        ended_at TEXT
    );
    ALTER TABLE attempts ADD COLUMN worker TEXT;
    """,
    # A provider's rpm / tpm and its outage clock, shared by every process of a shared store (issue 31): each model
    # call to a limited provider is a row from its start until a window after its end (`owner`: the process whose
    # call it is, so a lost worker's calls in flight can be ended for it); an outage is a row per provider and base
    # URL. Times are seconds of the database's clock, the one clock every machine sees. Used on PostgreSQL only
    # (store/provider_limits.py); a SQLite store has one process, whose windows are in memory.
    12: """
    CREATE TABLE provider_calls (
        id TEXT PRIMARY KEY,
        provider TEXT NOT NULL,
        owner TEXT NOT NULL,
        started REAL NOT NULL,
        ended REAL,
        tokens INTEGER NOT NULL DEFAULT 0
    );
    CREATE INDEX provider_calls_window ON provider_calls (provider, ended);
    CREATE TABLE provider_outages (
        provider_key TEXT PRIMARY KEY,
        down_since REAL NOT NULL,
        last_failed REAL NOT NULL
    );
    """,
}


def sqlite_statements(script: str) -> list[str]:
    """The statements of a migration script; a trigger's body (with its own semicolons) stays one statement."""
    out: list[str] = []
    buffer = ""
    for piece in script.split(";"):
        buffer += piece + ";"
        if sqlite3.complete_statement(buffer):
            if buffer.strip(" \n;"):
                out.append(buffer)
            buffer = ""
    if buffer.strip(" \n;"):
        out.append(buffer)
    return out


# PostgreSQL's tallies trigger: the body of SQLite's (migration 9) as a function. The change counter of the series
# (series_seq) is taken first and its row stays locked until the transaction commits, so a series' changes commit
# in the order of their numbers and a reader that read up to n never misses a change numbered below n later.
_PG_TALLY_TRIGGER = [
    """
    CREATE OR REPLACE FUNCTION aqven_attempts_cells() RETURNS trigger LANGUAGE plpgsql AS $$
    DECLARE
        old_seq BIGINT;
        new_seq BIGINT;
    BEGIN
        INSERT INTO series_seq VALUES (OLD.series_id, 1)
            ON CONFLICT (series_id) DO UPDATE SET n = series_seq.n + 1 RETURNING n INTO old_seq;
        new_seq := old_seq;
        IF NEW.series_id IS DISTINCT FROM OLD.series_id THEN
            INSERT INTO series_seq VALUES (NEW.series_id, 1)
                ON CONFLICT (series_id) DO UPDATE SET n = series_seq.n + 1 RETURNING n INTO new_seq;
        END IF;
        INSERT INTO series_cells VALUES (
            OLD.series_id, OLD.side, OLD.variant_id, OLD.case_name, OLD.status, COALESCE(OLD.outcome, ''),
            -1, -OLD.reruns, -COALESCE(OLD.value, 0), -OLD.unpriced,
            -(CASE WHEN OLD.active_at_end IS NOT NULL THEN 1 ELSE 0 END), old_seq
        ) ON CONFLICT (series_id, side, variant_id, case_name, status, outcome) DO UPDATE SET
            n = series_cells.n + excluded.n, reruns = series_cells.reruns + excluded.reruns,
            v = series_cells.v + excluded.v, unpriced = series_cells.unpriced + excluded.unpriced,
            ends = series_cells.ends + excluded.ends, seq = excluded.seq;
        IF OLD.cost_usd IS NOT NULL THEN
            INSERT INTO series_costs VALUES (OLD.series_id, OLD.side, OLD.variant_id, OLD.cost_usd, -1, old_seq)
                ON CONFLICT (series_id, side, variant_id, cost_usd) DO UPDATE SET
                n = series_costs.n + excluded.n, seq = excluded.seq;
        END IF;
        INSERT INTO series_cells VALUES (
            NEW.series_id, NEW.side, NEW.variant_id, NEW.case_name, NEW.status, COALESCE(NEW.outcome, ''),
            1, NEW.reruns, COALESCE(NEW.value, 0), NEW.unpriced,
            (CASE WHEN NEW.active_at_end IS NOT NULL THEN 1 ELSE 0 END), new_seq
        ) ON CONFLICT (series_id, side, variant_id, case_name, status, outcome) DO UPDATE SET
            n = series_cells.n + excluded.n, reruns = series_cells.reruns + excluded.reruns,
            v = series_cells.v + excluded.v, unpriced = series_cells.unpriced + excluded.unpriced,
            ends = series_cells.ends + excluded.ends, seq = excluded.seq;
        IF NEW.cost_usd IS NOT NULL THEN
            INSERT INTO series_costs VALUES (NEW.series_id, NEW.side, NEW.variant_id, NEW.cost_usd, 1, new_seq)
                ON CONFLICT (series_id, side, variant_id, cost_usd) DO UPDATE SET
                n = series_costs.n + excluded.n, seq = excluded.seq;
        END IF;
        RETURN NULL;
    END
    $$
    """,
    """
    CREATE TRIGGER attempts_cells
    AFTER UPDATE OF series_id, side, variant_id, case_name, status, outcome, value, reruns, unpriced, cost_usd,
        active_at_end ON attempts
    FOR EACH ROW EXECUTE FUNCTION aqven_attempts_cells()
    """,
]

_TRIGGER = re.compile(r"CREATE TRIGGER.*?\bEND;", re.S)
_TYPES = (
    (re.compile(r"\bINTEGER\b"), "BIGINT"),  # seeds and counters are 64-bit, as SQLite's INTEGER is
    (re.compile(r"\bREAL\b"), "DOUBLE PRECISION"),
    # Text compares byte by byte, as in SQLite: the same ORDER BY gives the same order (and FINDINGS.md the same
    # bytes) on both backends, whatever the database's locale.
    (re.compile(r"\bTEXT\b"), 'TEXT COLLATE "C"'),
    (re.compile(r"\)\s*WITHOUT ROWID"), ")"),
)


def postgres_statements(version: int) -> list[str]:
    """Migration `version` as PostgreSQL statements."""
    script = MIGRATIONS[version]
    trigger_dropped = "DROP TRIGGER attempts_cells;" in script
    script = _TRIGGER.sub("", script).replace("DROP TRIGGER attempts_cells;", "")
    out = []
    for statement in sqlite_statements(script):
        if statement.lstrip().startswith(("CREATE TABLE", "ALTER TABLE")):
            for pattern, replacement in _TYPES:
                statement = pattern.sub(replacement, statement)
        out.append(statement.rstrip().rstrip(";"))
    if trigger_dropped:  # migration 9 replaced migration 8's trigger: PostgreSQL's is made once, here
        out += _PG_TALLY_TRIGGER
    return out


def check_version(current: int, *, hint: str) -> int:
    """The database's schema version, refused when it is newer than this AQVEN knows."""
    if current > SCHEMA_VERSION:
        raise AqvenError(
            f"the project database has schema version {current}; this AQVEN knows {SCHEMA_VERSION}",
            code=DB_SCHEMA_NEWER,
            hint=hint,
        )
    return current
