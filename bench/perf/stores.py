"""The two store backends for the benches that print SQLite and PostgreSQL side by side.

`postgres_server(dsn)` gives a PostgreSQL server the bench may create databases on: the one `dsn` names
(`--postgres`), or by default a private durable cluster (tests/support/postgres.py: initdb in a temporary folder,
fsync, synchronous_commit and full_page_writes on, loopback only), stopped and removed afterwards. `store(backend,
server)` points `AQVEN_STORE` at a fresh database of it for one pass (SQLite: unset, the project's own file).

Where the server's processes can be seen (a private cluster, or a local server whose data directory the DSN's user
may read), `PgServer.cpu_s()` is the CPU time of the postmaster and all its children, exited ones included
(/proc/<pid>/stat utime+stime+cutime+cstime), `PgServer.pin(cpus)` sets the CPU affinity of all of them (children
forked later inherit the postmaster's), and `pin_self(cpus)` that of every thread of this process.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from support.postgres import Cluster, create_database, drop_database, need_driver, private_cluster

BACKENDS = ("sqlite", "postgresql")
SHORT = {"sqlite": "SQLite", "postgresql": "PostgreSQL"}
TICK = os.sysconf("SC_CLK_TCK")
_CLIENT = re.compile(rb"^postgres: \S+ \S+ (\S+\(\d+\)|\[local\])")  # a client backend's process title


def parse_stores(text: str) -> list[str]:
    names = [s.strip().lower() for s in text.split(",") if s.strip()]
    names = ["postgresql" if s in ("postgres", "pg") else s for s in names]
    bad = [s for s in names if s not in BACKENDS]
    if bad or not names:
        raise SystemExit(f"--store takes a comma-separated list of {', '.join(BACKENDS)}; got {text!r}")
    return names


def _stat(pid: int) -> list[str] | None:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def children(pid: int) -> list[int]:
    """The live child processes of `pid` (from /proc)."""
    out: list[int] = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None and int(st[1]) == pid:
                out.append(int(entry.name))
    return out


def cpu_with_children_s(pid: int) -> float:
    """CPU seconds of `pid`, its exited (waited-for) children and its live children."""
    total = 0
    for p in [pid, *children(pid)]:
        st = _stat(p)
        if st is not None:
            total += sum(int(x) for x in st[11:15])  # utime stime cutime cstime
    return total / TICK


def tree_cpu_s(roots: list[int]) -> float:
    """CPU seconds of the processes `roots` and all their live descendants, each with its exited (waited-for)
    children (one /proc scan: a daemon's workers and their own children are counted too)."""
    kids: dict[int, list[int]] = {}
    stats: dict[int, list[str]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                stats[int(entry.name)] = st
                kids.setdefault(int(st[1]), []).append(int(entry.name))
    total, todo, seen = 0, list(roots), set()
    while todo:
        pid = todo.pop()
        if pid in seen or pid not in stats:
            continue
        seen.add(pid)
        total += sum(int(x) for x in stats[pid][11:15])  # utime stime cutime cstime
        todo.extend(kids.get(pid, []))
    return total / TICK


def _threads() -> list[int]:
    return [int(t) for t in os.listdir("/proc/self/task")]


def pin_self(cpus: set[int]) -> None:
    """This process's threads (and the threads they start later) on `cpus` only."""
    for tid in _threads():
        with contextlib.suppress(OSError):
            os.sched_setaffinity(tid, cpus)


def all_cpus() -> set[int]:
    return set(range(os.cpu_count() or 1))


@dataclass
class PgServer:
    """A PostgreSQL server for the benches; `cluster` when it is a private one (whose settings may be changed)."""

    dsn: str
    cluster: Cluster | None = None
    postmaster: int | None = None

    def fresh(self, prefix: str = "aqven_bench") -> str:
        """A new empty database; its DSN."""
        return create_database(self.dsn, prefix)

    def drop(self, dsn: str) -> None:
        drop_database(self.dsn, dsn)

    @property
    def sees_processes(self) -> bool:
        return self.postmaster is not None

    def cpu_s(self) -> float | None:
        """CPU seconds of the server so far (all its processes), or None where its processes cannot be seen."""
        return None if self.postmaster is None else cpu_with_children_s(self.postmaster)

    def idle(self, timeout_s: float = 10.0) -> bool:
        """Wait until no client backend is left (the pass's connections closed and their processes ended)."""
        if self.postmaster is None:
            return False
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            busy = False
            for pid in children(self.postmaster):
                with contextlib.suppress(OSError):
                    if _CLIENT.match(Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")):
                        busy = True
                        break
            if not busy:
                return True
            time.sleep(0.02)
        return False

    def pin(self, cpus: set[int]) -> None:
        """The postmaster and its children on `cpus` (backends forked later inherit it)."""
        if self.postmaster is None:
            return
        for pid in [self.postmaster, *children(self.postmaster)]:
            with contextlib.suppress(OSError):
                os.sched_setaffinity(pid, cpus)

    def set_durable(self, durable: bool) -> bool:
        """fsync, synchronous_commit and full_page_writes on (or off) for the next connections; False where this
        server's settings are not ours to change (only a private cluster's are)."""
        if self.cluster is None:
            return False
        import psycopg

        with psycopg.connect(self.dsn, autocommit=True) as conn:
            for name in ("fsync", "synchronous_commit", "full_page_writes"):
                conn.execute(f"ALTER SYSTEM SET {name} = {'on' if durable else 'off'}")
            conn.execute("SELECT pg_reload_conf()")
        time.sleep(0.2)  # the postmaster reloads the file on its signal
        return True

    def database_mib(self, dsn: str) -> float:
        import psycopg

        name = urlsplit(dsn).path.lstrip("/")
        with psycopg.connect(self.dsn, autocommit=True) as conn:
            row = conn.execute("SELECT pg_database_size(%s)", (name,)).fetchone()
        return (row[0] if row else 0) / 2**20


def _local_postmaster(dsn: str) -> int | None:
    """The postmaster of a server on this machine whose data directory we may read (superuser), else None."""
    import psycopg

    with contextlib.suppress(psycopg.Error, OSError, ValueError, TypeError):
        with psycopg.connect(dsn, autocommit=True, connect_timeout=10) as conn:
            row = conn.execute("SHOW data_directory").fetchone()
        pid = int((Path(str(row[0] if row else "")) / "postmaster.pid").read_text().split("\n", 1)[0])
        if _stat(pid) is not None:
            return pid
    return None


VIAS = ("tcp", "socket")


@contextlib.contextmanager
def postgres_server(dsn: str | None, *, durable: bool = True, via: str = "tcp") -> Iterator[PgServer]:
    """The server `dsn` names, else a private cluster (durable by default) for as long as the block runs, reached
    over TCP on loopback or (`via="socket"`) through its unix socket, as a client on its machine connects by
    default."""
    need_driver()
    if dsn:
        yield PgServer(dsn=dsn, postmaster=_local_postmaster(dsn))
        return
    with private_cluster(durable=durable) as cluster:
        reached = cluster.socket_dsn if via == "socket" else cluster.dsn
        yield PgServer(dsn=reached, cluster=cluster, postmaster=cluster.postmaster_pid())


@contextlib.contextmanager
def store(backend: str, server: PgServer | None, prefix: str = "aqven_bench") -> Iterator[str | None]:
    """AQVEN_STORE for one pass: a fresh PostgreSQL database (its DSN is yielded, dropped afterwards), or unset
    for SQLite (each pass's project has its own file)."""
    saved = os.environ.pop("AQVEN_STORE", None)
    dsn: str | None = None
    try:
        if backend == "postgresql":
            assert server is not None
            dsn = server.fresh(prefix)
            os.environ["AQVEN_STORE"] = dsn
        yield dsn
    finally:
        os.environ.pop("AQVEN_STORE", None)
        if saved is not None:
            os.environ["AQVEN_STORE"] = saved
        if dsn is not None and server is not None:
            with contextlib.suppress(Exception):
                server.drop(dsn)


Row = tuple[str, str, str, str]


def cell(v: float | None, fmt: str, unit: str = "") -> str:
    return "–" if v is None else f"{v:{fmt}}{unit}"


def ratio(pg: float | None, lite: float | None) -> str:
    if pg is None or lite is None or lite == 0:
        return "–"
    return f"{pg / lite:.2f}×"


def table(title: str, rows: list[Row]) -> str:
    """A side-by-side table: metric, SQLite, PostgreSQL, PG/SQLite."""
    head = ("", "SQLite", "PostgreSQL", "PG/SQLite")
    widths = [max(len(r[i]) for r in [head, *rows]) for i in range(4)]

    def line(r: tuple[str, ...]) -> str:
        return "  ".join((c.ljust(widths[i]) if i == 0 else c.rjust(widths[i])) for i, c in enumerate(r))

    return "\n".join([f"== {title}", line(head), *(line(r) for r in rows)])
