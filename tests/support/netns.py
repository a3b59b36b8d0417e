"""Test "hosts" on one Linux machine: network namespaces joined by a switch (issue 31's multi-host tests).

    with Network() as net:                       # NetnsUnavailable where namespaces cannot be made
        db, server = net.host("db"), net.host("server")
        proc = server.popen([sys.executable, "-m", "aqven", "serve", ...])   # runs inside the host
        server.call(urllib.request.urlopen, "http://127.0.0.1:…/api/health")  # this process, inside the host
        db.cut(); db.restore()                   # the host's cable pulled and plugged back

The layout: a namespace `aqvn-PID-sw` holds a bridge (the switch); each host is a namespace `aqvn-PID-NAME` with
its loopback up and one veth `eth0` on 10.231.N.H/24 whose other end is a port of the bridge; this process's own
namespace (the observer: the test, a fake provider it serves) is on the switch too, at 10.231.N.254, through a veth
`aqvnPID` (so it reads a database or serves a provider on a host's network without routing or forwarding). N is a
/24 no other interface of this machine has (a file lock orders concurrent runs). A command run in a host also gets a
UTS namespace of its own whose host name is the host's (so `socket.gethostname()` differs per host).

`cut()` sets the host's switch port down: what the host sends is dropped and nothing reaches it, as with a pulled
cable (its own interface stays up, so its sockets see silence, not an error). `restore()` sets it up again.

Cleanup: `close()` (the context manager's exit) kills every process left in the hosts, deletes the namespaces and
the observer's veth, and waits until the kernel has removed them. Namespaces and links of a run whose process is
dead (`aqvn-PID-…`, `aqvnPID`: a test run that was killed) are removed when the next Network is made.

Where namespaces cannot be made (not Linux, not root, no `ip`, no veth or bridge in this kernel), `Network()` raises
NetnsUnavailable saying why: the tests say so and run their processes on loopback instead (`Loopback`, with the same
interface: every host is this machine, and a host's link to a service can still be cut by a relay, `reach`).
"""

from __future__ import annotations

import contextlib
import ctypes
import fcntl
import os
import re
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, TypeVar

from aqven.server.lifecycle import pid_alive

PREFIX = "aqvn"
"""Every namespace this module makes is named `aqvn-PID-…` and the observer's link `aqvnPID`."""
SUBNETS = "10.231"
OBSERVER = 254
LOCK = Path("/tmp/aqven-netns.lock")
CLONE_NEWNET = 0x40000000

T = TypeVar("T")


class NetnsUnavailable(RuntimeError):
    """Network namespaces cannot be made here; the message says why."""


def _ip(*args: str, check: bool = True, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    if check and out.returncode != 0:
        raise RuntimeError(f"ip {' '.join(args)} failed ({out.returncode}): {out.stderr.strip()}")
    return out


def why_unavailable() -> str | None:
    """Why namespaces cannot be made here, or None when they should be."""
    if not sys.platform.startswith("linux"):
        return f"network namespaces are Linux's; this is {sys.platform}"
    if os.geteuid() != 0:
        return "making network namespaces needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN); the tests run as uid " + str(
            os.geteuid()
        )
    if shutil.which("ip") is None:
        return "no `ip` command (iproute2) on the PATH"
    return None


def _namespaces() -> list[str]:
    out = _ip("netns", "list", check=False)
    return [line.split()[0] for line in out.stdout.splitlines() if line.strip()]


def _links() -> list[str]:
    out = _ip("-o", "link", "show", check=False)
    return [m.group(1) for m in re.finditer(r"^\d+: ([^:@\s]+)", out.stdout, re.M)]


def _kill_inside(netns: str) -> None:
    """SIGKILL every process in a namespace (a namespace lives on while a process is in it)."""
    out = _ip("netns", "pids", netns, check=False)
    for word in out.stdout.split():
        with contextlib.suppress(ValueError, OSError):
            os.kill(int(word), signal.SIGKILL)


def _wait_gone(names: Sequence[str], listing: Callable[[], list[str]], timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and set(names) & set(listing()):
        time.sleep(0.05)


def remove_leftovers() -> list[str]:
    """Remove the namespaces and links of runs whose process is dead (a killed test run); returns their names."""
    removed: list[str] = []
    mine = re.compile(rf"^{PREFIX}-(\d+)-")
    dead_ns = [n for n in _namespaces() if (m := mine.match(n)) and not pid_alive(int(m.group(1)))]
    for netns in dead_ns:
        _kill_inside(netns)
    link = re.compile(rf"^{PREFIX}(\d+)(?:h\d+)?$")
    dead_links = [n for n in _links() if (m := link.match(n)) and not pid_alive(int(m.group(1)))]
    for name in dead_links:
        _ip("link", "del", name, check=False)
        removed.append(name)
    for netns in dead_ns:
        _ip("netns", "del", netns, check=False)
        removed.append(netns)
    _wait_gone(dead_ns, _namespaces)
    _wait_gone(dead_links, _links)
    return removed


_libc: Any = None


def _setns(path: str) -> None:
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(path, os.O_RDONLY)
    try:
        if _libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns({path}): {os.strerror(err)}")
    finally:
        os.close(fd)


class Host:
    """A test host: a network namespace on the switch, at `address`."""

    def __init__(self, net: Network, name: str, netns: str, address: str, port: str) -> None:
        self.net, self.name, self.netns, self.address, self.port = net, name, netns, address, port
        self.is_cut = False

    def command(self, cmd: Sequence[str]) -> list[str]:
        """`cmd` run inside this host (its network, and its own host name). Each step execs the next, so the
        process that runs `cmd` is the one started (its pid is the Popen's)."""
        inside = ["ip", "netns", "exec", self.netns]
        if shutil.which("unshare") and shutil.which("hostname"):
            inside += ["unshare", "--uts", "--", "sh", "-c", 'hostname "$0" && exec "$@"', self.name]
        return [*inside, *cmd]

    def popen(self, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(self.command(cmd), **kw)

    def run(self, cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(self.command(cmd), **kw)

    def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        """`fn(*args, **kw)` in a thread of this process that entered this host's network: the sockets it makes
        are the host's (its loopback, its address), so a server that answers on its own loopback can be asked."""
        box: dict[str, Any] = {}

        def inside() -> None:
            try:
                _setns(f"/var/run/netns/{self.netns}")
                box["value"] = fn(*args, **kw)
            except BaseException as exc:
                box["error"] = exc

        thread = threading.Thread(target=inside, name=f"in-{self.netns}", daemon=True)
        thread.start()
        thread.join()
        if "error" in box:
            raise box["error"]
        return box["value"]  # type: ignore[no-any-return]

    def reach(self, address: str, port: int) -> tuple[str, int]:
        """Where this host reaches `address:port` (a service on another host): there, directly."""
        return address, port

    def cut(self) -> None:
        """Pull the cable: the host's switch port goes down (its packets are dropped both ways)."""
        _ip("-n", self.net.switch, "link", "set", self.port, "down")
        self.is_cut = True

    def restore(self) -> None:
        _ip("-n", self.net.switch, "link", "set", self.port, "up")
        self.is_cut = False


class Network:
    """The switch and its hosts (see the module's docstring); a context manager that removes all it made."""

    kind = "network namespaces"

    def __init__(self) -> None:
        why = why_unavailable()
        if why is not None:
            raise NetnsUnavailable(why)
        self.pid = os.getpid()
        self.switch = f"{PREFIX}-{self.pid}-sw"
        self.link = f"{PREFIX}{self.pid}"
        self.hosts: dict[str, Host] = {}
        self._made: list[str] = []
        try:
            remove_leftovers()
            with open(LOCK, "a+b") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX)
                self.subnet = self._free_subnet()
                self._make_switch()
        except NetnsUnavailable:
            self.close()
            raise
        except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
            self.close()
            raise NetnsUnavailable(f"a network namespace or veth pair could not be made: {exc}") from exc
        self.observer = f"{self.subnet}.{OBSERVER}"

    def _free_subnet(self) -> str:
        used = set(re.findall(rf"inet {re.escape(SUBNETS)}\.(\d+)\.", _ip("-4", "-o", "addr", "show").stdout))
        for n in range(1, 255):
            if str(n) not in used:
                return f"{SUBNETS}.{n}"
        raise NetnsUnavailable(f"every {SUBNETS}.N.0/24 is in use on this machine")

    def _make_switch(self) -> None:
        _ip("netns", "add", self.switch)
        self._made.append(self.switch)
        _ip("-n", self.switch, "link", "add", "br0", "type", "bridge")
        _ip("-n", self.switch, "link", "set", "br0", "up")
        peer = f"{self.link}p"
        _ip("link", "add", self.link, "type", "veth", "peer", "name", peer)
        _ip("link", "set", peer, "netns", self.switch)
        _ip("-n", self.switch, "link", "set", peer, "master", "br0", "up")
        _ip("addr", "add", f"{self.subnet}.{OBSERVER}/24", "dev", self.link)
        _ip("link", "set", self.link, "up")

    def host(self, name: str) -> Host:
        """A new host on the switch (its name: letters, digits and '-', at most 20)."""
        if not re.fullmatch(r"[a-z0-9-]{1,20}", name) or name in self.hosts or name == "sw":
            raise ValueError(f"bad or taken host name {name!r}")
        number = len(self.hosts) + 2
        netns = f"{PREFIX}-{self.pid}-{name}"
        port, end = f"p{number}", f"{PREFIX}{self.pid}h{number}"
        try:
            _ip("netns", "add", netns)
            self._made.append(netns)
            _ip("netns", "exec", netns, "ip", "link", "set", "lo", "up")
            _ip("link", "add", end, "type", "veth", "peer", "name", port)
            _ip("link", "set", port, "netns", self.switch)
            _ip("-n", self.switch, "link", "set", port, "master", "br0", "up")
            _ip("link", "set", end, "netns", netns)
            _ip("-n", netns, "link", "set", end, "name", "eth0")
            address = f"{self.subnet}.{number}"
            _ip("-n", netns, "addr", "add", f"{address}/24", "dev", "eth0")
            _ip("-n", netns, "link", "set", "eth0", "up")
        except RuntimeError as exc:
            raise NetnsUnavailable(f"host {name} could not be made: {exc}") from exc
        host = self.hosts[name] = Host(self, name, netns, address, port)
        return host

    def wait_connected(self, timeout: float = 10.0) -> None:
        """Wait until the switch forwards (a bridge port may take a moment to come up)."""
        deadline = time.monotonic() + timeout
        for host in self.hosts.values():
            while not _ip("-n", self.switch, "link", "show", host.port).stdout.count("state UP"):
                if time.monotonic() > deadline:
                    raise NetnsUnavailable(f"the switch port of host {host.name} did not come up")
                time.sleep(0.05)

    def close(self) -> None:
        """Kill what still runs in the hosts and remove every namespace and link made (idempotent)."""
        for netns in self._made:
            _kill_inside(netns)
        if self.link in _links():
            _ip("link", "del", self.link, check=False)
        for netns in reversed(self._made):
            _ip("netns", "del", netns, check=False)
        _wait_gone(self._made, _namespaces)
        _wait_gone([self.link], _links)
        self._made.clear()
        self.hosts.clear()

    def __enter__(self) -> Network:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# ---- the stand-in where namespaces cannot be made ---------------------------------------------------------------


class _Relay:
    """A TCP relay on 127.0.0.1 to `target`, which `hold()` silences: nothing is read or passed on either way, and a
    new connection is accepted but not connected onward (as packets to a pulled cable vanish) until `release()`."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self.open = threading.Event()
        self.open.set()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._pair, args=(client,), daemon=True).start()

    def _pair(self, client: socket.socket) -> None:
        self.open.wait()
        try:
            upstream = socket.create_connection(self.target, timeout=10)
        except OSError:
            client.close()
            return
        upstream.settimeout(None)
        ends = [client, upstream]
        try:
            while not self._closed:
                if not self.open.is_set():
                    time.sleep(0.05)
                    continue
                ready, _, _ = select.select(ends, [], [], 0.1)
                for end in ready:
                    data = end.recv(65536)
                    if not data:
                        return
                    (upstream if end is client else client).sendall(data)
        except OSError:
            return
        finally:
            for end in ends:
                with contextlib.suppress(OSError):
                    end.close()

    def close(self) -> None:
        self._closed = True
        self.open.set()
        with contextlib.suppress(OSError):
            self.listener.close()


class LoopbackHost:
    """A "host" that is this machine: commands run here, at 127.0.0.1; `cut()` silences its relays (`reach`)."""

    def __init__(self, net: Loopback, name: str) -> None:
        self.net, self.name, self.address = net, name, "127.0.0.1"
        self.relays: list[_Relay] = []
        self.is_cut = False

    def command(self, cmd: Sequence[str]) -> list[str]:
        return list(cmd)

    def popen(self, cmd: Sequence[str], **kw: Any) -> subprocess.Popen[bytes]:
        return subprocess.Popen(list(cmd), **kw)

    def run(self, cmd: Sequence[str], **kw: Any) -> subprocess.CompletedProcess[Any]:
        return subprocess.run(list(cmd), **kw)

    def call(self, fn: Callable[..., T], *args: Any, **kw: Any) -> T:
        return fn(*args, **kw)

    def reach(self, address: str, port: int) -> tuple[str, int]:
        """A relay of this host's own to `address:port`, which `cut()` silences."""
        relay = _Relay((address, port))
        self.relays.append(relay)
        return "127.0.0.1", relay.port

    def cut(self) -> None:
        for relay in self.relays:
            relay.open.clear()
        self.is_cut = True

    def restore(self) -> None:
        for relay in self.relays:
            relay.open.set()
        self.is_cut = False


class Loopback:
    """Network's stand-in: every host is this machine (see the module's docstring)."""

    kind = "loopback processes"

    def __init__(self, why: str = "") -> None:
        self.why = why
        self.observer = "127.0.0.1"
        self.hosts: dict[str, LoopbackHost] = {}

    def host(self, name: str) -> LoopbackHost:
        host = self.hosts[name] = LoopbackHost(self, name)
        return host

    def wait_connected(self, timeout: float = 10.0) -> None:
        return None

    def close(self) -> None:
        for host in self.hosts.values():
            for relay in host.relays:
                relay.close()
        self.hosts.clear()

    def __enter__(self) -> Loopback:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


AnyHost = Host | LoopbackHost
AnyNetwork = Network | Loopback


@contextlib.contextmanager
def hosts_or_loopback(say: Callable[[str], None] = print) -> Iterator[AnyNetwork]:
    """A Network, or where namespaces cannot be made, a Loopback, after `say`ing why."""
    try:
        net: AnyNetwork = Network()
    except NetnsUnavailable as exc:
        say(f"network namespaces cannot be made here ({exc}): the hosts are loopback processes of this machine")
        net = Loopback(str(exc))
    with net:
        yield net
