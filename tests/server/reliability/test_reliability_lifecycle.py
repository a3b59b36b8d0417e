"""Server lifecycle after a crash: a server.json whose pid now belongs to another process is stale.

A killed server (or a reboot) leaves `.aqven/server.json` behind. When its pid is later reused by an unrelated
process, the file looks alive: the pid answers kill(0), but nothing answers /api/health for the project. Every
server holds `.aqven/server.lock` for its whole life, so a free lock proves the file stale: the CLI starts a
new server instead of waiting for one that will never answer, and `aqven serve` does not refuse to start.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from aqven.server.lifecycle import ensure_server, read_server, server_file
from support.commands import stop_server
from support.fault_soak import write_project

# The server's files and lock in the project folder, whatever the store: once is enough.
pytestmark = pytest.mark.sqlite_only


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def test_server_json_with_a_reused_pid_does_not_block_the_next_server(tmp_path: Path) -> None:
    root = tmp_path / "p"
    write_project(root, cases=2, simulator="seeded")
    stranger = subprocess.Popen(["sleep", "120"])  # the process that got the dead server's pid
    try:
        path = server_file(root)
        path.parent.mkdir(parents=True, exist_ok=True)
        stale = {"pid": stranger.pid, "port": _free_port(), "host": "127.0.0.1", "root": str(root.resolve())}
        path.write_text(json.dumps(stale))
        assert read_server(root) is None and not path.exists()  # the lock is free: the file was stale
        path.write_text(json.dumps(stale))
        port = ensure_server(root, timeout=90)
        info = read_server(root)
        assert info is not None and info["healthy"] and info["port"] == port and info["pid"] != stranger.pid
    finally:
        stop_server(root)
        stranger.kill()
        stranger.wait()


def test_a_server_killed_a_moment_ago_that_still_looks_alive_is_replaced(tmp_path: Path) -> None:
    """Just after a SIGKILL a server can still look alive at the first look (its pid exiting, its lock not yet let
    go) and be gone at the next. The CLI that follows a series starts a new one all the same (it used to start one
    only when the first look found none, and then waited in vain)."""
    root = tmp_path / "p"
    write_project(root, cases=2, simulator="seeded")
    path = server_file(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    # A dying server: it holds the project's lock, answers nothing, and is gone 1.5 s later.
    dying = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from filelock import FileLock; lock = FileLock(sys.argv[1]); lock.acquire();"
            " print('held', flush=True); time.sleep(1.5)",
            str(path.parent / "server.lock"),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert dying.stdout is not None and dying.stdout.readline().strip() == "held"
        path.write_text(json.dumps({"pid": dying.pid, "port": _free_port(), "host": "127.0.0.1"}))
        info = read_server(root)
        assert info is not None and info["healthy"] is False  # looks alive, starting or dying
        port = ensure_server(root, timeout=60)
        info = read_server(root)
        assert info is not None and info["healthy"] and info["port"] == port and info["pid"] != dying.pid
    finally:
        stop_server(root)
        dying.kill()
        dying.wait()


def test_a_cli_that_starts_the_server_waits_until_the_server_loaded_the_project(tmp_path: Path) -> None:
    """A server loads and checks its project in the background when it starts; a series started before that waits
    for the load (seconds for a large dataset). The CLI that started the server waits until /api/health says warm."""
    root = tmp_path / "p"
    write_project(root, cases=20_000, simulator="seeded")  # a load that takes a while
    try:
        port = ensure_server(root, timeout=90)
        info = read_server(root)
        assert info is not None and info["healthy"] and info["port"] == port
        assert info["warm"], "ensure_server returned before the server had loaded the project"
    finally:
        stop_server(root)
