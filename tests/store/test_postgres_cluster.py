"""The tests' real PostgreSQL (support/postgres.py, the fixtures in conftest.py): it answers, every test gets a
fresh empty database of its own, a private cluster comes back from a crash with what was committed, and it
listens on loopback only, run by an unprivileged user."""

from __future__ import annotations

import os
import socket
from urllib.parse import urlsplit

import psycopg
import pytest

from support import postgres


def _one(dsn: str, query: str) -> object:
    with psycopg.connect(dsn, connect_timeout=10) as conn:
        row = conn.execute(query).fetchone()
    assert row is not None
    return row[0]


def _private(postgres_dsn: str) -> None:
    if postgres.external_server():
        pytest.skip(f"{postgres.SERVER_ENV} names a server of its own: only a private cluster's set-up is checked")


def test_the_server_answers(postgres_dsn: str) -> None:
    assert _one(postgres_dsn, "SELECT 1") == 1
    assert str(_one(postgres_dsn, "SHOW server_encoding")) == "UTF8"


def test_each_test_gets_a_fresh_empty_database_of_its_own(postgres_dsn: str, pg_database: str) -> None:
    other = postgres.create_database(postgres_dsn)
    try:
        assert urlsplit(other).path != urlsplit(pg_database).path
        tables = "SELECT count(*) FROM information_schema.tables WHERE table_schema = 'public'"
        assert _one(pg_database, tables) == 0
        with psycopg.connect(pg_database) as conn:
            conn.execute("CREATE TABLE t (k integer PRIMARY KEY)")
            conn.execute("INSERT INTO t VALUES (1)")
        assert _one(pg_database, "SELECT count(*) FROM t") == 1
        assert _one(other, tables) == 0  # the other database saw none of it
    finally:
        postgres.drop_database(postgres_dsn, other)
    name = urlsplit(other).path.lstrip("/")
    assert _one(postgres_dsn, f"SELECT count(*) FROM pg_database WHERE datname = '{name}'") == 0


def test_a_dropped_database_goes_even_with_a_connection_open(postgres_dsn: str) -> None:
    dsn = postgres.create_database(postgres_dsn)
    conn = psycopg.connect(dsn)
    try:
        postgres.drop_database(postgres_dsn, dsn)
    finally:
        conn.close()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=10).close()


def test_store_url_is_one_backend_each(store_url: str | None, request: pytest.FixtureRequest) -> None:
    if request.node.name.endswith("[sqlite]"):
        assert store_url is None
    else:
        assert store_url is not None and store_url.startswith("postgresql://")
        assert _one(store_url, "SELECT current_database()") == urlsplit(store_url).path.lstrip("/")


def test_committed_data_survives_an_immediate_restart(pg_cluster: postgres.Cluster) -> None:
    assert _one(pg_cluster.dsn, "SHOW fsync") == "on"  # the crash tests' cluster is durable
    with psycopg.connect(pg_cluster.dsn) as conn:
        conn.execute("CREATE TABLE t (k integer PRIMARY KEY)")
        conn.execute("INSERT INTO t SELECT generate_series(1, 1000)")
    held = psycopg.connect(pg_cluster.dsn)
    held.execute("INSERT INTO t VALUES (1001)")  # in flight, never committed
    before = pg_cluster.postmaster_pid()
    pg_cluster.restart_immediate()
    assert pg_cluster.postmaster_pid() != before
    with pytest.raises(psycopg.OperationalError):
        held.commit()  # its server went away
    held.close()
    assert _one(pg_cluster.dsn, "SELECT count(*) FROM t") == 1000
    assert "database system was interrupted" in pg_cluster.log.read_text()  # recovery ran: it was a crash


def test_stop_and_start_keep_the_address(pg_cluster: postgres.Cluster) -> None:
    dsn = pg_cluster.dsn
    pg_cluster.stop()
    assert not pg_cluster.running()
    with pytest.raises(psycopg.OperationalError):
        psycopg.connect(dsn, connect_timeout=5).close()
    pg_cluster.start()
    assert pg_cluster.dsn == dsn
    assert _one(dsn, "SELECT 1") == 1


def _other_address() -> str | None:
    """An address of this machine other than loopback, if it has one."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        try:
            s.connect(("192.0.2.1", 9))  # TEST-NET-1: routing only picks the source address, nothing is sent
        except OSError:
            return None
        address = str(s.getsockname()[0])
    return None if address.startswith("127.") or address == "0.0.0.0" else address


def test_the_private_cluster_listens_on_loopback_only(postgres_dsn: str) -> None:
    _private(postgres_dsn)
    port = urlsplit(postgres_dsn).port
    assert port is not None and urlsplit(postgres_dsn).hostname == "127.0.0.1"
    assert _one(postgres_dsn, "SHOW listen_addresses") == "127.0.0.1"
    other = _other_address()
    if other is not None:
        with pytest.raises(OSError), socket.create_connection((other, port), timeout=5):
            pass


def test_the_private_cluster_runs_as_an_unprivileged_user(postgres_dsn: str) -> None:
    _private(postgres_dsn)
    data = str(_one(postgres_dsn, "SHOW data_directory"))
    assert os.stat(data).st_uid != 0
    with open(os.path.join(data, "postmaster.pid")) as pid_file:
        pid = int(pid_file.readline())
    with open(f"/proc/{pid}/status") as status:
        uids = next(line for line in status if line.startswith("Uid:")).split()[1:]
    assert "0" not in uids
