"""One server decides for a store on PostgreSQL: a second `aqven serve` on the same store, from another project
folder (as from another machine), exits with STORE_HELD naming the holder; once the holder is SIGKILLed,
PostgreSQL lets the lock go and a new server starts. Real server processes on a real PostgreSQL."""

from __future__ import annotations

import os
import socket
from pathlib import Path

import psycopg
import pytest

from aqven.project.init import init_project
from aqven.store.postgres_db import _SERVER_LOCK
from support import postgres
from support.commands import aqven, cli_env
from support.live_server import LiveServer
from support.series_kit import wait_until

# These tests pick their stores themselves: once is enough (sqlite_only keeps the suite's PostgreSQL copy away).
pytestmark = pytest.mark.sqlite_only


def test_a_second_server_on_the_same_store_is_refused_and_named(
    tmp_path: Path, pg_database: str, postgres_dsn: str, request: pytest.FixtureRequest
) -> None:
    """A bystander holds another store of the same PostgreSQL server: the refusal names the holder of this one."""
    env = {**cli_env(), "AQVEN_STORE": pg_database}
    first_root = init_project(tmp_path / "first", "lumen")
    second_root = init_project(tmp_path / "second", "lumen")
    other_store = postgres.create_database(postgres_dsn)
    request.addfinalizer(lambda: postgres.drop_database(postgres_dsn, other_store))
    bystander = LiveServer(init_project(tmp_path / "bystander", "lumen"), {**env, "AQVEN_STORE": other_store})
    with bystander, LiveServer(first_root, env) as first:
        assert first.get("/api/health").get("status") == "ok"
        out = aqven("serve", cwd=second_root, env=env, timeout=60)
        assert out.returncode == 2, out.stdout + out.stderr
        text = out.stdout + out.stderr
        assert "STORE_HELD" in text and "hint:" in text, text
        assert first.proc is not None and f"pid {first.proc.pid}" in text and socket.gethostname() in text, text
        assert "aqven serve first" in text and "bystander" not in text, text  # the holder's project folder
        # With the store given on the command line, the same.
        bare = {k: v for k, v in env.items() if k != "AQVEN_STORE"}
        out = aqven("serve", "--store", pg_database, cwd=second_root, env=bare, timeout=60)
        assert out.returncode == 2 and "STORE_HELD" in out.stdout + out.stderr
        first.kill()  # a crash: PostgreSQL lets the session's lock go
    with LiveServer(second_root, env) as second:
        assert second.get("/api/health").get("status") == "ok"
        status = aqven("server", "status", "--json", cwd=second_root, env=env)
        assert '"store": "postgresql://' in status.stdout, status.stdout
    assert os.environ.get("AQVEN_STORE") in (None, pg_database)


def test_a_bad_store_setting_is_refused_before_the_server_starts(tmp_path: Path) -> None:
    root = init_project(tmp_path / "p", "lumen")
    env = {k: v for k, v in cli_env().items() if k != "AQVEN_STORE"}
    out = aqven("serve", "--store", "mysql://x@y/z", cwd=root, env=env, timeout=60)
    assert out.returncode == 2 and "STORE_INVALID" in out.stdout + out.stderr and "hint:" in out.stdout + out.stderr
    (root / ".aqven").mkdir(exist_ok=True)
    (root / ".aqven" / "local.yaml").write_text("store: oracle://nowhere\n")
    out = aqven("store", "show", cwd=root, env=env)
    assert out.returncode == 2 and "STORE_INVALID" in out.stdout + out.stderr
    assert "Traceback" not in out.stdout + out.stderr


def _holders(dsn: str) -> list[str]:
    """The application names of the sessions holding a store's server lock."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s AND l.objid = %s"
            " AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())",
            ((_SERVER_LOCK >> 32) & 0xFFFFFFFF, _SERVER_LOCK & 0xFFFFFFFF),
        ).fetchall()
    return [str(r[0]) for r in rows]


def test_the_store_is_held_again_after_a_postgresql_restart(tmp_path: Path, pg_cluster: postgres.Cluster) -> None:
    """A crash of PostgreSQL ends the server's session and its lock: the server takes it again by itself, so a
    second server is still refused."""
    dsn = postgres.create_database(pg_cluster.dsn)
    env = {**cli_env(), "AQVEN_STORE": dsn}
    first_root = init_project(tmp_path / "first", "lumen")
    second_root = init_project(tmp_path / "second", "lumen")
    with LiveServer(first_root, env) as first:
        assert _holders(dsn) == [f"aqven serve first on {socket.gethostname()} pid {first.proc.pid}"]  # type: ignore[union-attr]
        pg_cluster.restart_immediate()
        wait_until(lambda: len(_holders(dsn)) == 1, timeout=20, step=0.2)
        out = aqven("serve", cwd=second_root, env=env, timeout=60)
        assert out.returncode == 2 and "STORE_HELD" in out.stdout + out.stderr, out.stdout + out.stderr
        assert first.get("/api/health").get("status") == "ok"


def test_a_server_whose_store_was_taken_during_a_restart_stops(tmp_path: Path, pg_cluster: postgres.Cluster) -> None:
    """Another session takes the lock while PostgreSQL comes back, before the server looks again (slowed to 5 s
    here): the server stops deciding, and says why in its log."""
    dsn = postgres.create_database(pg_cluster.dsn)
    env = {**cli_env(), "AQVEN_STORE": dsn, "AQVEN_STORE_HOLD_CHECK_S": "5"}
    root = init_project(tmp_path / "first", "lumen")
    with LiveServer(root, env) as first:
        pg_cluster.restart_immediate()
        with psycopg.connect(dsn, autocommit=True) as usurper:
            (took,) = usurper.execute("SELECT pg_try_advisory_lock(%s)", (_SERVER_LOCK,)).fetchone()  # type: ignore[misc]
            assert took
            assert first.proc is not None
            first.proc.wait(30)
        log = (root / ".aqven" / "test-server.log").read_text()
        assert "STORE_HELD" in log and "this server stops" in log, log
