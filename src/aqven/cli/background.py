"""The project server a command started: it runs on in the background after the command ends, and the command says
so once, with how to stop it (`aqven server status|stop`)."""

from __future__ import annotations

import contextlib
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from aqven.cli.render import err_console
from aqven.server.client import Client
from aqven.server.lifecycle import read_server

_clients: list[Client] = []


def connect(root: Path) -> Client:
    """A client of the project's server (started when none runs); remembered, so that the command can say at its
    end that a server it started keeps running."""
    client = Client(root)
    _clients.append(client)
    return client


def root_option(root: Path) -> str:
    """` --root DIR` when the project is not the one found from the current folder (so a printed command works)."""
    from aqven.project.paths import find_root

    here = find_root(Path.cwd())
    return "" if here is not None and here.resolve() == root.resolve() else f" --root {root}"


def say_still_running() -> None:
    """Once per project: the server this command started runs on in the background, and how to stop it."""
    seen: set[Path] = set()
    for client in _clients:
        root = client.root.resolve()
        if not client.started_server or root in seen:
            continue
        seen.add(root)
        info = None
        with contextlib.suppress(OSError, ValueError):
            info = read_server(root)
        if info is None:
            continue
        err_console.print(
            f"the project server keeps running in the background (pid {info['pid']}, port {info['port']}): "
            f"`aqven server stop{root_option(root)}` stops it",
            markup=False,
            soft_wrap=True,
        )
    _clients.clear()


def since(started_at: Any) -> str:
    """'2025-01-02 10:11:12 UTC (3 h 4 min ago)' for a server's `started_at`, or the raw value."""
    try:
        at = datetime.fromisoformat(str(started_at))
    except ValueError:
        return str(started_at)
    secs = max(0, int((datetime.now(UTC) - at).total_seconds()))
    ago = f"{secs // 3600} h {secs % 3600 // 60} min" if secs >= 3600 else f"{secs // 60} min {secs % 60} s"
    return f"{at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC ({ago} ago)"
