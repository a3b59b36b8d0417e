"""An AQVEN cluster across test hosts (support/netns.py): PostgreSQL on one host, `aqven serve --cluster` on
another, `aqven worker`s each on a host of its own, all on the project's files (one folder on disk, as a shared or
identical checkout would be). Used by tests/research/cluster/test_cluster_hosts.py and bench/soak/cluster_hosts.py.

    with Hosts(workdir, workers=3) as hosts:   # namespaces, or loopback processes where they cannot be made
        dsn = hosts.database()
        server = hosts.server(root, env, dsn)
        hosts.worker("w1", root, env, dsn)
        server.get("/api/health")            # asked from inside the server's host (it answers on its loopback)
        hosts.worker_hosts["w1"].cut()

Everything started is stopped at the end, the PostgreSQL cluster removed (or by its watchdog, when this process is
killed first), and the namespaces deleted.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from support import netns
from support.postgres import Cluster, PostgresUnavailable, create_database

ENDED = ("done", "failed", "cancelled")


def _with_address(dsn: str, address: str, port: int) -> str:
    parts = urlsplit(dsn)
    user = parts.netloc.rsplit("@", 1)[0]
    return urlunsplit(parts._replace(netloc=f"{user}@{address}:{port}"))


class Process:
    """A process of a host in its own session, logging to `log`."""

    def __init__(self, host: netns.AnyHost, cmd: list[str], env: dict[str, str], log: Path, cwd: Path) -> None:
        self.host, self.cmd, self.env, self.log, self.cwd = host, cmd, env, log, cwd
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = self.host.popen(
                self.cmd,
                env=self.env,
                cwd=self.cwd,
                stdout=out,
                stderr=out,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL its whole session (`aqven worker` and the worker process it supervises)."""
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGKILL)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(10)

    def stop(self) -> None:
        if self.alive():
            assert self.proc is not None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.kill()
        self.kill()  # what is left of its session

    def tail(self, chars: int = 3000) -> str:
        try:
            return self.log.read_text(errors="replace")[-chars:]
        except OSError:
            return ""


class Server(Process):
    """`python -m aqven serve --root ROOT --store DSN --cluster` on its host; asked from inside the host."""

    def __init__(self, host: netns.AnyHost, root: Path, env: dict[str, str], dsn: str) -> None:
        cmd = [sys.executable, "-m", "aqven", "serve", "--root", str(root), "--store", dsn, "--cluster"]
        super().__init__(host, cmd, env, root / ".aqven" / "test-server.log", root)
        self.root = root
        self.port = 0
        self.token = ""

    def start(self, timeout: float = 60.0) -> None:
        info_file = self.root / ".aqven" / "server.json"
        with contextlib.suppress(OSError):
            info_file.unlink()  # a killed server leaves it behind
        super().start()
        assert self.proc is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited with {self.proc.returncode}:\n{self.tail()}")
            with contextlib.suppress(OSError, ValueError, KeyError):
                info = json.loads(info_file.read_text())
                if int(info["pid"]) == self.proc.pid:
                    self.port, self.token = int(info["port"]), str(info["token"])
                    with contextlib.suppress(OSError):
                        if self.call("GET", "/api/health", timeout=3)[1].get("status") == "ok":
                            return
            time.sleep(0.1)
        raise RuntimeError(f"the server did not answer in {timeout} s:\n{self.tail()}")

    def call(self, method: str, path: str, body: Any = None, timeout: float = 60.0) -> tuple[int, Any]:
        """(status, JSON body) of one request, made from inside the server's host."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"content-type": "application/json", "authorization": f"Bearer {self.token}"},
        )

        def ask() -> tuple[int, Any]:
            try:
                with urllib.request.urlopen(request, timeout=timeout) as response:
                    return response.status, json.loads(response.read())
            except urllib.error.HTTPError as err:
                return err.code, json.loads(err.read() or b"null")

        return self.host.call(ask)

    def get(self, path: str, timeout: float = 60.0) -> Any:
        status, data = self.call("GET", path, timeout=timeout)
        assert status == 200, (path, status, data)
        return data

    def post(self, path: str, body: Any) -> Any:
        status, data = self.call("POST", path, body)
        assert status < 300, (path, status, data)
        return data

    def wait_series(self, series_id: str, limit_s: float) -> dict[str, Any]:
        """The series once it ended (or its state at `limit_s`); GETs that fail meanwhile (a restart) are retried."""
        deadline = time.monotonic() + limit_s
        state: dict[str, Any] = {"status": "unknown"}
        while time.monotonic() < deadline:
            with contextlib.suppress(AssertionError, OSError):
                wait = max(1, min(20, int(deadline - time.monotonic())))
                state = self.get(f"/api/series/{series_id}?wait_seconds={wait}", timeout=wait + 30)
                if state["status"] in ENDED:
                    return state
            if not self.alive():
                time.sleep(0.2)
        return state


class Worker(Process):
    """`python -m aqven worker --store DSN --project ROOT --name NAME --slots N` on its host."""

    def __init__(self, host: netns.AnyHost, name: str, root: Path, env: dict[str, str], dsn: str, slots: int) -> None:
        cmd = [sys.executable, "-m", "aqven", "worker", "--store", dsn, "--project", str(root)]
        cmd += ["--name", name, "--slots", str(slots)]
        super().__init__(host, cmd, env, root.parent / f"worker-{name}.log", root)
        self.name = name


class Hosts:
    """PostgreSQL's host `db`, the server's `server` and worker hosts `w1`…`wN` (see the module's docstring)."""

    def __init__(
        self, workdir: Path, *, workers: int, durable: bool = False, say: Callable[[str], None] = print
    ) -> None:
        self.workdir = workdir
        self._stack = ExitStack()
        try:
            self.net: netns.AnyNetwork = self._stack.enter_context(netns.Network())
        except netns.NetnsUnavailable as exc:
            say(f"network namespaces cannot be made here ({exc}): the hosts are loopback processes of this machine")
            self.net = self._stack.enter_context(netns.Loopback(str(exc)))
        try:
            self.db_host = self.net.host("db")
            self.server_host = self.net.host("server")
            self.worker_hosts = {f"w{i}": self.net.host(f"w{i}") for i in range(1, workers + 1)}
            self.net.wait_connected()
            self.pg = self._postgres(durable)
        except BaseException:
            self._stack.close()
            raise
        self.processes: list[Process] = []

    @property
    def namespaces(self) -> bool:
        return isinstance(self.net, netns.Network)

    def _postgres(self, durable: bool) -> Cluster:
        host = self.db_host
        if isinstance(host, netns.Host):
            assert isinstance(self.net, netns.Network)
            inside = tuple(host.command([]))
            cluster = Cluster.create(durable=durable, host=host.address, trust=f"{self.net.subnet}.0/24", inside=inside)
        else:
            cluster = Cluster.create(durable=durable)
        cluster.attach(os.getpid())
        cluster.watch()  # removes it should this process be killed

        def gone() -> None:
            cluster.detach(os.getpid())

        self._stack.callback(gone)
        try:
            cluster.start()
        except PostgresUnavailable:
            raise
        return cluster

    def database(self, prefix: str = "aqven_hosts") -> str:
        """A fresh database; its DSN (at PostgreSQL's host address)."""
        return create_database(self.pg.dsn, prefix)

    def dsn_from(self, host: netns.AnyHost, dsn: str) -> str:
        """`dsn` as `host` reaches it (on loopback: through a relay of the host's own, which its cut() silences)."""
        parts = urlsplit(dsn)
        address, port = host.reach(parts.hostname or "127.0.0.1", int(parts.port or 5432))
        return _with_address(dsn, address, port)

    def server(self, root: Path, env: dict[str, str], dsn: str) -> Server:
        server = Server(self.server_host, root, env, dsn)
        self.processes.append(server)
        server.start()
        return server

    def worker(self, name: str, root: Path, env: dict[str, str], dsn: str, *, slots: int = 2) -> Worker:
        host = self.worker_hosts[name]
        worker = Worker(host, name, root, env, self.dsn_from(host, dsn), slots)
        self.processes.append(worker)
        worker.start()
        return worker

    def close(self) -> None:
        for process in self.processes:
            with contextlib.suppress(Exception):
                process.stop()
        for host in self.worker_hosts.values():
            with contextlib.suppress(Exception):
                host.restore()
        self._stack.close()

    def __enter__(self) -> Hosts:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def rows(dsn: str, sql: str, params: tuple[Any, ...] = (), wait_s: float = 60.0) -> list[dict[str, Any]]:
    """Rows read by a connection of this process (the observer), waiting out a restart of PostgreSQL."""
    import psycopg
    from psycopg.rows import dict_row

    deadline = time.monotonic() + wait_s
    while True:
        try:
            with psycopg.connect(dsn, autocommit=True, row_factory=dict_row, connect_timeout=10) as conn:
                return list(conn.execute(sql, params).fetchall())
        except psycopg.OperationalError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
