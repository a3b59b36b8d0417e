"""Start, find and stop the project server; `.aqven/server.json` records its port and pid."""

from __future__ import annotations

import contextlib
import hmac
import json
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from filelock import FileLock, Timeout

from aqven import __version__
from aqven.errors import SERVER_STOP_FAILED, AqvenError, ServerError
from aqven.project.paths import state_dir
from aqven.server.security import HOST, Access, health_proof
from aqven.store.location import store_of
from aqven.store.open import hold_store

SERVER_FILE = "server.json"
LOCK_TRIES = 10  # × 50 ms: how long a starting server waits for the project's lock before refusing


def server_file(root: Path) -> Path:
    return state_dir(root) / SERVER_FILE


def _store_lost(exc: AqvenError) -> None:
    """Another server took the store while PostgreSQL restarted: this one stops deciding at once (SIGTERM to itself,
    the graceful way out), so that two servers never run one project's series."""
    logging.getLogger("aqven.server").error("%s: %s; this server stops", exc.code, exc.message)
    os.kill(os.getpid(), signal.SIGTERM)


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie child still answers kill(0); treat it as gone.
    with contextlib.suppress(OSError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def health(port: int, token: str, timeout: float = 1.0) -> dict[str, Any] | None:
    """The health answer of the server on `port` when it proves it knows `token`, else None.

    The token itself is not sent: whatever listens on the port (a foreign program after a crash) learns
    nothing, and one that cannot answer the nonce with the token's proof is never trusted."""
    nonce = secrets.token_hex(16)
    try:
        url = f"http://{HOST}:{port}/api/health?nonce={nonce}"
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            data = json.loads(resp.read())
    except (urllib.error.URLError, OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("proof"), str) or not token:
        return None
    if not hmac.compare_digest(data["proof"], health_proof(token, nonce)):
        return None
    return data


def wait_warm(root: Path, port: int, deadline: float) -> int:
    """`port`, once the server on it says it is warm or at `deadline` (a server that is slow to load still serves)."""
    while time.monotonic() < deadline:
        info = read_server(root)
        if info is None or not info.get("healthy") or info.get("warm"):
            break
        time.sleep(0.05)
    return port


def read_server(root: Path) -> dict[str, Any] | None:
    """The running server of this project, or None. A stale server.json (dead pid) is removed."""
    path = server_file(root)
    try:
        info: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    if not isinstance(info, dict):
        return None
    try:
        pid, port, token = int(info.get("pid", 0)), int(info.get("port", 0)), str(info.get("token") or "")
    except (TypeError, ValueError):
        return None
    if not pid_alive(pid):
        with contextlib.suppress(OSError):
            path.unlink()
        return None
    alive = health(port, token)
    if alive is None:
        if _lock_free(root):
            # No process holds the server lock, so no server of this project runs or starts: the pid was
            # reused by another process (a killed server, a reboot). The file is stale.
            with contextlib.suppress(OSError):
                path.unlink()
            return None
        # The pid holds the lock but does not answer yet (still starting): check once more later.
        info["healthy"] = False
        return info
    info["healthy"] = True
    info["warm"] = alive.get("warm") != "no"
    return info


def _lock_free(root: Path) -> bool:
    """True when no process holds `.aqven/server.lock` (every server holds it for its whole life)."""
    probe = _file_lock(state_dir(root) / "server.lock")
    try:
        probe.acquire(timeout=0)
    except (Timeout, OSError):
        return False
    probe.release()
    return True


def _file_lock(path: Path) -> FileLock:
    """An exclusive lock on `path` that works on every platform (filelock: flock on POSIX, msvcrt on Windows).

    Not a singleton and not thread-local: a probe in the server's own process sees the server's lock as taken."""
    return FileLock(str(path), mode=0o600, thread_local=False, is_singleton=False, preserve_lock_file=True)


def bind_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, port))
    except OSError as exc:
        sock.close()
        raise ServerError(
            f"cannot listen on {HOST}:{port}: {exc.strerror}",
            code="PORT_IN_USE",
            hint="choose another --port, or leave it out for a free one",
        ) from None
    sock.listen(128)
    return sock


def claim(root: Path, port: int, token: str) -> None:
    """Write server.json for this process; refuse if another live server answers for this project."""
    existing = read_server(root)
    if existing is not None and existing.get("healthy") and int(existing.get("pid", 0)) != os.getpid():
        raise ServerError(
            f"a project server already runs for this project (pid {existing['pid']}, port {existing['port']})",
            code="SERVER_ALREADY_RUNNING",
            hint=f"use it (the CLI finds it by itself), or stop it first with `kill {existing['pid']}`",
        )
    path = server_file(root)
    secure_state_dir(root)
    tmp = path.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    record = {
        "pid": os.getpid(),
        "port": port,
        "host": HOST,
        "root": str(root.resolve()),
        "version": __version__,
        "started_at": datetime.now(UTC).isoformat(),
        "store": store_of(root).shown,  # never a password
        "token": token,  # the secret every request needs: this file is 0600 in a 0700 folder
    }
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(json.dumps(record))
    tmp.replace(path)


def secure_state_dir(root: Path) -> None:
    """`.aqven` 0700 and every file in it 0600: another local user reads neither the token nor the database."""
    folder = state_dir(root)
    folder.mkdir(parents=True, exist_ok=True, mode=0o700)
    with contextlib.suppress(OSError):
        folder.chmod(0o700)
    for path in folder.rglob("*"):
        with contextlib.suppress(OSError):
            if path.is_symlink():
                continue
            path.chmod(0o700 if path.is_dir() else 0o600)


def read_token(root: Path) -> str:
    """The token of this project's running server, from server.json ('' when there is none)."""
    try:
        info = json.loads(server_file(root).read_text())
    except (OSError, ValueError):
        return ""
    return str(info.get("token") or "") if isinstance(info, dict) else ""


def release(root: Path) -> None:
    path = server_file(root)
    with contextlib.suppress(OSError, ValueError):
        if json.loads(path.read_text()).get("pid") == os.getpid():
            path.unlink()


def serve(root: Path, port: int = 0) -> None:
    """Run the project server in this process until interrupted."""
    # Imported here, not for a cycle (nothing under app imports this module) but so that every `aqven` command,
    # which imports this module to find its server, does not load the web stack (and the models) it will not run.
    import uvicorn

    from aqven.models.masked_output import mask_output
    from aqven.server.app import create_app

    mask_output()  # before uvicorn's logging takes the streams: a key a project's code prints is logged masked
    root = root.resolve()
    lock = _lock_or_refuse(root)
    try:
        holder = f"aqven serve {root.name} on {socket.gethostname()} pid {os.getpid()}"
        release_store = hold_store(root, holder, _store_lost)
    except BaseException:
        lock.release()
        raise
    existing = read_server(root)
    if existing is not None and existing.get("healthy"):
        raise ServerError(
            f"a project server already runs for this project (pid {existing['pid']}, port {existing['port']})",
            code="SERVER_ALREADY_RUNNING",
            hint=f"use it, or stop it first with `kill {existing['pid']}`",
        )
    sock = bind_socket(port)
    actual = sock.getsockname()[1]
    access = Access(port=actual)
    claim(root, actual, access.token)
    # uvicorn re-raises SIGTERM/SIGINT after its graceful shutdown; with the default SIGTERM action that kills
    # the process before `finally` removes server.json. Exiting through Python instead runs it.
    previous = {sig: signal.signal(sig, _exit_on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        config = uvicorn.Config(create_app(root, access=access), log_level="warning", lifespan="on")
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        release(root)
        sock.close()
        release_store()
        lock.release()


def _exit_on_signal(signum: int, _frame: Any) -> None:
    raise SystemExit(128 + signum)


def _lock_or_refuse(root: Path) -> FileLock:
    """Hold `.aqven/server.lock` for the server's life: a second server for the project is refused."""
    path = state_dir(root) / "server.lock"
    secure_state_dir(root)
    lock = _file_lock(path)
    for attempt in range(LOCK_TRIES):
        try:
            lock.acquire(timeout=0)
            return lock
        except (Timeout, OSError):
            if attempt < LOCK_TRIES - 1:
                time.sleep(0.05)  # a client may be probing the lock for a moment (read_server)
    info = read_server(root) or {}
    raise ServerError(
        f"a project server already runs for this project (pid {info.get('pid', '?')}, port {info.get('port', '?')})",
        code="SERVER_ALREADY_RUNNING",
        hint="use it (the CLI finds it by itself), or stop that process first",
    )


WARM_WAIT_S = 20.0
"""How long a CLI that started the server waits for it to load the project before its first request."""


def ensure_server(root: Path, timeout: float = 30.0) -> int:
    """The port of this project's server, starting one in the background when none runs (and then waiting, at most
    WARM_WAIT_S, until it has loaded the project: its first request would otherwise wait for that load)."""
    return start_server(root, timeout)[0]


def start_server(root: Path, timeout: float = 30.0) -> tuple[int, bool]:
    """`ensure_server`, and whether this call started the server (the CLI then says it keeps running)."""
    root = root.resolve()
    spawned: subprocess.Popen[bytes] | None = None
    spawns = 0
    deadline = time.monotonic() + timeout
    first = True
    while True:
        info = read_server(root)
        if info is not None and info.get("healthy"):
            if first:
                return int(info["port"]), False
            return wait_warm(root, int(info["port"]), time.monotonic() + WARM_WAIT_S), spawned is not None
        # No server, or one that has not answered yet. A server SIGKILLed a moment ago can still look alive
        # (its pid exiting, its lock not yet let go) at the first look and be gone at the next: a server is
        # started whenever none is there and the one this call started (if any) has ended, not only at the first.
        if info is None and (spawned is None or spawned.poll() is not None) and spawns < SPAWN_TRIES:
            spawned = _spawn_server(root)
            spawns += 1
        first = False
        if time.monotonic() >= deadline:
            break
        time.sleep(0.1)
    raise ServerError(
        "the project server did not start", code="SERVER_START_FAILED", hint=f"see {state_dir(root) / 'server.log'}"
    )


SPAWN_TRIES = 3
"""How many servers one `start_server` call starts at most (one that lost the project's lock to another ends)."""


def _spawn_server(root: Path) -> subprocess.Popen[bytes]:
    """`aqven serve` in the background, its output appended to `.aqven/server.log`."""
    log = state_dir(root) / "server.log"
    log.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "aqven", "serve", "--root", str(root)],
            stdout=out,
            stderr=out,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(root),
        )


STOP_WAIT_S = 20.0
"""How long `aqven server stop` waits for the server to end after SIGTERM (it finishes its requests and closes
the database; running series pause there and resume when a server starts again)."""


def stop_server(root: Path, timeout: float = STOP_WAIT_S) -> dict[str, Any] | None:
    """Stop this project's server: SIGTERM, then wait until its process is gone. The server's record (None when no
    server runs); raises `ServerError` when it is still alive after `timeout` seconds."""
    info = read_server(root)
    if info is None:
        return None
    pid = int(info["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not pid_alive(pid):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)  # a server this process started itself: reap it
            return info
        time.sleep(0.05)
    raise ServerError(
        f"the project server (pid {pid}) is still running {timeout:.0f} s after it was asked to stop",
        code=SERVER_STOP_FAILED,
        hint=f"see {state_dir(root) / 'server.log'}; `kill -9 {pid}` ends it at once (a series resumes later)",
    )
