"""Shared fixtures: a showcase project on disk, the series tests' tiny project, clean-up of spawned servers, and
a real PostgreSQL (support/postgres.py). Helpers live in tests/support/ (importable as `support`)."""

from __future__ import annotations

import atexit
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import pytest

from support import postgres
from support.commands import stop_server


@pytest.fixture(scope="session", autouse=True)
def person_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The person folder of this test session (XDG_CONFIG_HOME, inherited by every server and command the tests
    start): person keys and project records never touch the user's own ~/.config."""
    folder = tmp_path_factory.mktemp("xdg-config")
    before = os.environ.get("XDG_CONFIG_HOME")
    os.environ["XDG_CONFIG_HOME"] = str(folder)
    yield folder / "aqven"
    if before is None:
        os.environ.pop("XDG_CONFIG_HOME", None)
    else:
        os.environ["XDG_CONFIG_HOME"] = before


@pytest.fixture
def showcase(tmp_path: Path) -> Iterator[Path]:
    """A fresh showcase project (package lumen); its server, if any was started, is stopped after."""
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    yield root
    stop_server(root)


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The series tests' tiny project environment (see support.series_kit.tiny_environment)."""
    from support.series_kit import tiny_environment

    return tiny_environment(monkeypatch, tmp_path)


@pytest.fixture
def hold(tiny_env: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """TINY_HOLD's folder: no attempt of the tiny simulator finishes until the test touches `open` or its case."""
    folder = tmp_path / "hold"
    folder.mkdir()
    monkeypatch.setenv("TINY_HOLD", str(folder))
    return folder


@pytest.fixture
def file_order(monkeypatch: pytest.MonkeyPatch) -> None:
    """Series run their cases in file order instead of the order their secret seed draws (the server runs in
    this process): for the tests whose cases must finish in a known order."""
    monkeypatch.setattr("aqven.research.series.order.case_order", lambda cases, seed: list(cases))


def _no_postgres(e: postgres.PostgresUnavailable) -> NoReturn:
    """A test that needs PostgreSQL fails saying what is missing (or, with AQVEN_TEST_NO_POSTGRES=1, skips)."""
    if postgres.skip_wanted():
        raise pytest.skip.Exception(str(e)) from None
    raise pytest.fail.Exception(str(e), pytrace=False) from None


@pytest.fixture(scope="session")
def postgres_dsn(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A PostgreSQL server where the tests may create databases (its superuser's DSN): AQVEN_TEST_POSTGRES's, or
    else one private cluster for the whole run, shared by the pytest-xdist workers and stopped after the last."""
    try:
        postgres.need_driver()
        if dsn := postgres.external_server():
            yield dsn
            return
        base = tmp_path_factory.getbasetemp()
        shared = postgres.SharedCluster(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
        cluster = shared.acquire()
    except postgres.PostgresUnavailable as e:
        _no_postgres(e)
    atexit.register(shared.release)  # should the session end without its finalizers
    try:
        yield cluster.dsn
    finally:
        shared.release()


@pytest.fixture
def pg_database(postgres_dsn: str) -> Iterator[str]:
    """The DSN of a fresh, empty database of its own, dropped after the test."""
    dsn = postgres.create_database(postgres_dsn)
    try:
        yield dsn
    finally:
        postgres.drop_database(postgres_dsn, dsn)


@pytest.fixture
def pg_cluster() -> Iterator[postgres.Cluster]:
    """A private cluster of the test's own, durable (fsync on), for tests that stop, start or crash the server
    (`restart_immediate`) without cutting off another test's connections; stopped and removed after."""
    try:
        postgres.need_driver()
        with postgres.private_cluster(durable=True) as cluster:
            yield cluster
    except postgres.PostgresUnavailable as e:
        _no_postgres(e)


@pytest.fixture(params=["sqlite", "postgresql"])
def store_url(request: pytest.FixtureRequest) -> str | None:
    """The store a test runs on, once per backend: None for SQLite (no store setting: the project's own
    .aqven/aqven.sqlite, as always), or the postgresql:// DSN of a fresh, empty database."""
    if request.param == "sqlite":
        return None
    dsn: str = request.getfixturevalue("pg_database")
    return dsn


@pytest.fixture
def backend(store_url: str | None, monkeypatch: pytest.MonkeyPatch) -> str | None:
    """Run the test on its backend: for PostgreSQL, AQVEN_STORE names a fresh database (the servers the test starts,
    in-process or as processes, and their workers all use it); for SQLite no store setting, as always."""
    if store_url is None:
        monkeypatch.delenv("AQVEN_STORE", raising=False)
    else:
        monkeypatch.setenv("AQVEN_STORE", store_url)
    return store_url


@pytest.fixture
def make_database(store_url: str | None, tmp_path: Path, postgres_dsn_or_none: str | None) -> Iterator[Any]:
    """`make_database(name)`: a new connection to the store called `name` of this test, on the test's backend (a
    SQLite file in tmp_path, or a PostgreSQL database made for that name); the same name is the same store."""
    from aqven.store.db import Database
    from aqven.store.location import StoreLocation
    from aqven.store.open import open_database

    made: dict[str, StoreLocation] = {}
    opened: list[Database] = []

    def make(name: str = "db.sqlite") -> Database:
        if name not in made:
            if store_url is None:
                made[name] = StoreLocation("sqlite", path=tmp_path / name)
            else:
                assert postgres_dsn_or_none is not None
                made[name] = StoreLocation("postgresql", dsn=postgres.create_database(postgres_dsn_or_none))
        db = open_database(made[name])
        opened.append(db)
        return db

    yield make
    for db in opened:
        db.close()
    for location in made.values():
        if location.dsn is not None and postgres_dsn_or_none is not None:
            postgres.drop_database(postgres_dsn_or_none, location.dsn)


@pytest.fixture
def postgres_dsn_or_none(store_url: str | None, request: pytest.FixtureRequest) -> str | None:
    """The PostgreSQL server's DSN when the test runs on PostgreSQL (None on SQLite)."""
    return None if store_url is None else str(request.getfixturevalue("postgres_dsn"))


# Module-scoped fixtures that hold nothing of a project's store: a test that uses only these still runs on both.
_STORELESS_MODULE_FIXTURES = frozenset({"browser"})


def _shares_a_module_store(item: pytest.Item) -> bool:
    """Whether the test uses a module-scoped fixture other than a browser (a server or project started once per
    module, before any test's backend is chosen: it is on SQLite, whatever the test's parameter says)."""
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return False
    for name in item.fixturenames:  # type: ignore[attr-defined]
        defs = info.name2fixturedefs.get(name, ())
        if defs and defs[-1].scope == "module" and name not in _STORELESS_MODULE_FIXTURES:
            return True
    return False


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """A test marked `sqlite_only` (it tests SQLite itself) runs once, on SQLite; so does one that shares a server
    or project with the rest of its module (`_shares_a_module_store`). One marked `postgres_only` runs on
    PostgreSQL alone."""
    kept: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        callspec = getattr(item, "callspec", None)
        on = None if callspec is None else callspec.params.get("store_url")
        once = item.get_closest_marker("sqlite_only") is not None or _shares_a_module_store(item)
        only_postgres = item.get_closest_marker("postgres_only") is not None
        dropped_here = (on == "postgresql" and once) or (only_postgres and on != "postgresql")
        (dropped if dropped_here else kept).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept
