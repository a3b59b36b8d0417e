"""The `aqven` command in a subprocess, a clean environment for it, and the project server it starts."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from aqven.models.outcomes import KEY_ENV_VARS as KEY_VARS


def cli_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in KEY_VARS and k != "AQVEN_SIMULATE"}
    env.update({"AQVEN_SIM_LATENCY_SCALE": "0", "NO_COLOR": "1", "COLUMNS": "200"})
    env.update(extra)
    return env


def aqven(
    *args: str, cwd: Path, env: dict[str, str] | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "aqven", *args],
        cwd=cwd,
        env=env or cli_env(),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def api_client(app: Any, **kw: Any) -> Any:
    """A TestClient of an in-process app that sends the app's server token, as the CLI does."""
    from fastapi.testclient import TestClient

    headers = {"Authorization": f"Bearer {app.state.access.token}", **kw.pop("headers", {})}
    return TestClient(app, headers=headers, **kw)


def server_token(root: Path) -> str:
    """The token of the project server running for `root` (from its server.json)."""
    return str(json.loads((root / ".aqven" / "server.json").read_text())["token"])


def stop_server(root: Path) -> None:
    path = root / ".aqven" / "server.json"
    try:
        pid = int(json.loads(path.read_text())["pid"])
    except (OSError, ValueError, KeyError):
        return
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.05)
    os.kill(pid, signal.SIGKILL)
