"""A real PostgreSQL for the tests and the benches: the server that AQVEN_TEST_POSTGRES names, or else a private
cluster of this machine's PostgreSQL binaries (Debian's `postgresql`; scripts/test.sh installs it where missing).

A private cluster is made with `initdb` in a temporary folder (its data, log and unix socket), owned by and run
as an unprivileged user (`postgres` when the tests run as root: initdb refuses root), trusting connections on
127.0.0.1 only, listening on a free port there and nowhere else. One test run shares one cluster between its
pytest-xdist workers (`SharedCluster`: the first to ask starts it, the last to leave stops it), and each test gets
a fresh empty database in it (`create_database`). Tests that crash the server (`Cluster.restart_immediate`) get a
cluster of their own, so that no other worker's connections are cut.

Whoever uses a cluster is on its owner list (a file in its folder), and a small watchdog process stops the cluster
and removes its folder once every owner has ended, even when none of them could stop it (a killed test run).

AQVEN_TEST_NO_POSTGRES=1 makes the tests that need PostgreSQL skip, saying why, where it cannot be had; without it
they fail with a message that says what is missing and how to get it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from aqven.server.lifecycle import pid_alive

SERVER_ENV = "AQVEN_TEST_POSTGRES"  # postgresql://USER[:PASSWORD]@HOST:PORT/DB, a server where USER may create DBs
SKIP_ENV = "AQVEN_TEST_NO_POSTGRES"  # "1": the tests that need PostgreSQL skip (with the reason) where it is missing
RUN_AS = "postgres"  # the unprivileged user a private cluster runs as when the tests run as root
SUPERUSER = "postgres"  # the cluster's own superuser, whoever runs it

FIX = (
    "Install Debian's postgresql (`apt-get install postgresql`; scripts/test.sh does so when it runs as root), "
    f"or set {SERVER_ENV}=postgresql://USER@HOST:PORT/DB to a server where USER may create databases "
    f"(or {SKIP_ENV}=1 to skip these tests instead)."
)


OWN_FIX = (
    "Install Debian's postgresql (`apt-get install postgresql`; scripts/test.sh does so when it runs as root): "
    f"this test stops, crashes or restarts a server of its own, which {SERVER_ENV} cannot stand in for "
    f"(or {SKIP_ENV}=1 to skip these tests instead)."
)


class PostgresUnavailable(RuntimeError):
    """PostgreSQL cannot be had here; the message says what is missing and how to fix it."""

    def __init__(self, missing: str, fix: str = FIX) -> None:
        super().__init__(f"PostgreSQL is needed but cannot be had: {missing}. {fix}")
        self.missing = missing


def skip_wanted() -> bool:
    return os.environ.get(SKIP_ENV, "") not in ("", "0")


def external_server() -> str | None:
    """AQVEN_TEST_POSTGRES's DSN, if it is set (only postgresql:// URLs: a test database's DSN is derived from it)."""
    dsn = os.environ.get(SERVER_ENV, "").strip()
    if not dsn:
        return None
    if urlsplit(dsn).scheme not in ("postgresql", "postgres"):
        raise PostgresUnavailable(f"{SERVER_ENV} is not a postgresql:// URL")
    return dsn


def find_bindir() -> Path | None:
    """The folder of this machine's PostgreSQL server programs (initdb, pg_ctl, postgres), newest first:
    `pg_config --bindir`, Debian's /usr/lib/postgresql/<version>/bin, then initdb on the PATH."""
    candidates: list[Path] = []
    if pg_config := shutil.which("pg_config"):
        with contextlib.suppress(OSError, subprocess.SubprocessError):
            out = subprocess.run([pg_config, "--bindir"], capture_output=True, text=True, timeout=10, check=True)
            candidates.append(Path(out.stdout.strip()))
    debian = [p for p in Path("/usr/lib/postgresql").glob("*/bin") if p.parent.name.isdigit()]
    candidates += sorted(debian, key=lambda p: int(p.parent.name), reverse=True)
    if initdb := shutil.which("initdb"):
        candidates.append(Path(initdb).resolve().parent)
    for bindir in candidates:
        if all(os.access(bindir / tool, os.X_OK) for tool in ("initdb", "pg_ctl", "postgres")):
            return bindir
    return None


def _need_bindir() -> Path:
    bindir = find_bindir()
    if bindir is None:
        raise PostgresUnavailable(
            "no PostgreSQL server programs (initdb, pg_ctl, postgres) were found in `pg_config --bindir`, "
            "/usr/lib/postgresql/*/bin or on the PATH"
        )
    if os.geteuid() == 0:
        try:
            pwd.getpwnam(RUN_AS)
        except KeyError:
            raise PostgresUnavailable(
                f"the tests run as root, initdb refuses root, and there is no unprivileged user {RUN_AS!r} to "
                f"run a private cluster as (Debian's postgresql creates it; or `useradd --system {RUN_AS}`)"
            ) from None
    return bindir


def _as_owner(cmd: list[str]) -> list[str]:
    """`cmd` run as the cluster's unprivileged owner: RUN_AS when we are root, else ourselves."""
    if os.geteuid() != 0:
        return cmd
    if runuser := shutil.which("runuser"):
        return [runuser, "-u", RUN_AS, "--", *cmd]
    return ["su", RUN_AS, "-s", "/bin/sh", "-c", " ".join(_quote(c) for c in cmd)]


def _quote(word: str) -> str:
    return "'" + word.replace("'", "'\\''") + "'"


def _chown_to_owner(path: Path) -> None:
    if os.geteuid() == 0:
        user = pwd.getpwnam(RUN_AS)
        os.chown(path, user.pw_uid, user.pw_gid)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 just now (the kernel's pick)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    with open(path, "a+b") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _env() -> dict[str, str]:
    """Our environment without libpq's PG* variables (PGDATA, PGPORT, PGHOST…), which would steer pg_ctl."""
    return {k: v for k, v in os.environ.items() if not k.startswith("PG")}


@dataclass
class Cluster:
    """A private PostgreSQL cluster in `folder` (data/, server.log, the unix socket, the owner list)."""

    folder: Path
    bindir: Path
    port: int
    host: str = "127.0.0.1"
    """The address it listens on: loopback, or a test host's (support/netns.py)."""
    inside: tuple[str, ...] = ()
    """A command prefix that starts the server inside a test host's network (`ip netns exec NAME`)."""

    @property
    def data(self) -> Path:
        return self.folder / "data"

    @property
    def log(self) -> Path:
        return self.folder / "server.log"

    @property
    def dsn(self) -> str:
        """The superuser's DSN to the `postgres` database (trust on loopback: no password)."""
        return f"postgresql://{SUPERUSER}@{self.host}:{self.port}/postgres"

    @property
    def socket_dsn(self) -> str:
        """The same through the cluster's unix socket (how a client on its machine connects by default)."""
        return f"postgresql://{SUPERUSER}@/postgres?host={self.folder}&port={self.port}"

    @classmethod
    def create(
        cls,
        *,
        durable: bool = False,
        bindir: Path | None = None,
        host: str = "127.0.0.1",
        trust: str | None = None,
        inside: tuple[str, ...] = (),
    ) -> Cluster:
        """initdb a new cluster in a new temporary folder (not started). `durable=False` turns fsync,
        synchronous_commit and full_page_writes off for speed; crash tests that want them on pass True (an
        immediate restart keeps committed data either way: the kernel still holds what was written).

        `host`: the address to listen on (a test host's, with `inside` the prefix that runs pg_ctl in its network
        namespace); `trust`: a network (CIDR) whose connections are trusted too, besides loopback."""
        bindir = bindir or _need_bindir()
        base = "/tmp" if os.geteuid() == 0 else None  # RUN_AS must reach it, and the socket path must stay short
        folder = Path(tempfile.mkdtemp(prefix="aqven-pg-", dir=base))
        _chown_to_owner(folder)
        cluster = cls(folder=folder, bindir=bindir, port=free_port(), host=host, inside=inside)
        try:
            cluster._run(
                [
                    str(bindir / "initdb"),
                    "--pgdata",
                    str(cluster.data),
                    f"--username={SUPERUSER}",
                    "--auth=trust",
                    "--encoding=UTF8",
                    "--locale=C",
                    "--no-sync",
                ],
                "initdb",
            )
            fsync = "on" if durable else "off"
            settings = {
                "listen_addresses": f"'{host}'",
                "unix_socket_directories": f"'{folder}'",
                "max_connections": "200",
                "fsync": fsync,
                "synchronous_commit": fsync,
                "full_page_writes": fsync,
            }
            with open(cluster.data / "postgresql.conf", "a") as conf:
                conf.write("\n# the AQVEN tests' private cluster\n")
                conf.writelines(f"{key} = {value}\n" for key, value in settings.items())
                conf.write("include_if_exists = 'port.conf'\n")
            if trust:
                with open(cluster.data / "pg_hba.conf", "a") as hba:
                    hba.write(f"host all all {trust} trust\n")
            cluster._write_port()
            (folder / "owners.json").write_text(json.dumps({"owners": []}))
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        return cluster

    @classmethod
    def at(cls, folder: Path) -> Cluster:
        """The cluster of an existing folder (as `save` left it)."""
        info = json.loads((folder / "cluster.json").read_text())
        host = str(info.get("host", "127.0.0.1"))
        return cls(folder=folder, bindir=Path(info["bindir"]), port=int(info["port"]), host=host)

    def save(self) -> None:
        info = {"bindir": str(self.bindir), "port": self.port, "host": self.host}
        (self.folder / "cluster.json").write_text(json.dumps(info))

    def _write_port(self) -> None:
        (self.data / "port.conf").write_text(f"port = {self.port}\n")
        self.save()

    def _run(self, cmd: list[str], what: str, timeout: float = 120, inside: bool = False) -> None:
        out = subprocess.run(
            [*(self.inside if inside else ()), *_as_owner(cmd)],
            cwd=self.folder,
            env=_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        if out.returncode != 0:
            log = self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""
            raise RuntimeError(f"{what} failed ({out.returncode}): {out.stdout}{out.stderr}\n{log}".rstrip())

    def _pg_ctl(self, *args: str, what: str, inside: bool = False) -> None:
        """pg_ctl; `inside`: in the cluster's test host (a start: the server must listen on its network)."""
        cmd = [str(self.bindir / "pg_ctl"), "--pgdata", str(self.data), "--log", str(self.log), *args]
        self._run(cmd, what, inside=inside)

    def start(self) -> None:
        """Start the server and wait until it accepts connections. The first start picks another free port if
        someone took this one meanwhile."""
        for attempt in range(5):
            try:
                self._pg_ctl("--wait", "--timeout=60", "start", what="pg_ctl start", inside=True)
                return
            except RuntimeError as e:
                if attempt == 4 or ("could not bind" not in str(e) and "already in use" not in str(e)):
                    raise
                self.port = free_port()
                self._write_port()

    def stop(self) -> None:
        """Stop the server (fast: clients are disconnected, work in flight is rolled back); no-op if stopped."""
        if self.running():
            self._pg_ctl("--wait", "--timeout=60", "--mode=fast", "stop", what="pg_ctl stop")

    def restart_immediate(self) -> None:
        """A crash and a restart: `pg_ctl restart -m immediate` (no shutdown checkpoint; recovery replays the
        WAL), back when it accepts connections again, on the same port."""
        self._pg_ctl(
            "--wait", "--timeout=60", "--mode=immediate", "restart", what="pg_ctl restart -m immediate", inside=True
        )

    def running(self) -> bool:
        if not self.data.exists():
            return False
        status = subprocess.run(
            _as_owner([str(self.bindir / "pg_ctl"), "--pgdata", str(self.data), "status"]),
            cwd=self.folder,
            env=_env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=30,
        )
        return status.returncode == 0

    def postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split("\n", 1)[0])
        except (OSError, ValueError):
            return None

    def destroy(self) -> None:
        """Stop the server and remove the folder."""
        with contextlib.suppress(OSError, RuntimeError, subprocess.SubprocessError):
            self.stop()
        pid = self.postmaster_pid()
        if pid is not None and self.running():  # a stop that failed: it must not outlive us
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGQUIT)
        shutil.rmtree(self.folder, ignore_errors=True)

    # The owner list: the processes using this cluster. The watchdog destroys it when none is left alive.

    def attach(self, pid: int) -> bool:
        """Put `pid` on the owner list; False if the cluster was destroyed meanwhile."""
        try:
            with _flock(self.folder / "owners.lock"):
                owners = self._owners()
                if owners is None:
                    return False
                self._set_owners([*owners, pid])
                return True
        except FileNotFoundError:
            return False

    def detach(self, pid: int) -> None:
        """Take `pid` off the owner list; the last one alive to leave destroys the cluster."""
        with contextlib.suppress(FileNotFoundError), _flock(self.folder / "owners.lock"):
            owners = self._owners()
            if owners is None:
                return
            left = [p for p in owners if p != pid and pid_alive(p)]
            if left:
                self._set_owners(left)
            else:
                self._set_owners(None)
                self.destroy()

    def _owners(self) -> list[int] | None:
        """The owners, or None once destroyed."""
        try:
            owners = json.loads((self.folder / "owners.json").read_text())["owners"]
        except (OSError, ValueError, KeyError):
            return None
        return None if owners is None else [int(p) for p in owners]

    def _set_owners(self, owners: list[int] | None) -> None:
        (self.folder / "owners.json").write_text(json.dumps({"owners": owners}))

    def watch(self) -> None:
        """Start the watchdog: a process of its own session that destroys this cluster once no owner is alive."""
        subprocess.Popen(
            [sys.executable, "-I", __file__, "--watch", str(self.folder)],  # -I: no tests/support on sys.path
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
            close_fds=True,
        )


def _watchdog(folder: Path, every: float = 1.0) -> None:
    cluster = Cluster.at(folder)
    while True:
        time.sleep(every)
        try:
            with _flock(folder / "owners.lock"):
                owners = cluster._owners()
                if owners is None:
                    return
                if any(pid_alive(p) for p in owners):
                    continue
                cluster._set_owners(None)
                cluster.destroy()
                return
        except FileNotFoundError:
            return


@contextlib.contextmanager
def private_cluster(*, durable: bool = True) -> Iterator[Cluster]:
    """A cluster of our own, started, for as long as the block runs (crash tests, benches): stopped and removed
    after it, or by the watchdog if this process is killed first."""
    try:
        cluster = Cluster.create(durable=durable)
    except PostgresUnavailable as e:
        raise PostgresUnavailable(e.missing, OWN_FIX) from None
    cluster.attach(os.getpid())
    cluster.watch()
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.detach(os.getpid())


class SharedCluster:
    """One private cluster for every process of a test run that asks for one (the pytest-xdist workers), found
    through `root` (a folder the run's processes share): the first to ask starts it, the last to leave stops it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.cluster: Cluster | None = None

    def acquire(self) -> Cluster:
        pointer = self.root / "postgres-cluster"
        with _flock(self.root / "postgres-cluster.lock"):
            with contextlib.suppress(OSError, ValueError, KeyError):
                cluster = Cluster.at(Path(pointer.read_text().strip()))
                if cluster.running() and cluster.attach(os.getpid()):
                    self.cluster = cluster
                    return cluster
            cluster = Cluster.create(durable=False)
            cluster.attach(os.getpid())
            cluster.watch()
            try:
                cluster.start()
            except BaseException:
                cluster.detach(os.getpid())
                raise
            pointer.write_text(str(cluster.folder))
            self.cluster = cluster
            return cluster

    def release(self) -> None:
        """Leave (idempotent); the cluster stops when its last owner has left or ended."""
        cluster, self.cluster = self.cluster, None
        if cluster is not None:
            cluster.detach(os.getpid())


def database_dsn(server_dsn: str, name: str) -> str:
    """`server_dsn` with its database replaced by `name` (user, password, host, port and options kept)."""
    parts = urlsplit(server_dsn)
    return urlunsplit(parts._replace(path=f"/{name}"))


def create_database(server_dsn: str, prefix: str = "aqven_test") -> str:
    """A new empty database (a copy of template0) on `server_dsn`'s server; returns its DSN."""
    import psycopg
    from psycopg import sql

    name = f"{prefix}_{os.getpid()}_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=30) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {} TEMPLATE template0").format(sql.Identifier(name)))
    return database_dsn(server_dsn, name)


def drop_database(server_dsn: str, dsn: str) -> None:
    """Drop the database of `dsn` (made by create_database), disconnecting whoever is still connected to it."""
    import psycopg
    from psycopg import sql

    name = urlsplit(dsn).path.lstrip("/")
    with psycopg.connect(server_dsn, autocommit=True, connect_timeout=30) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


def need_driver() -> None:
    """psycopg must be importable (the extra `postgres`, which scripts/setup.sh installs)."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        raise PostgresUnavailable(
            "the driver psycopg is not installed (`bash scripts/setup.sh` installs the extra `postgres`)"
        ) from None


if __name__ == "__main__" and sys.argv[1:2] == ["--watch"]:
    _watchdog(Path(sys.argv[2]))
