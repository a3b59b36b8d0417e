"""Shared fixtures: a showcase project on disk, the `aqven` command, and clean-up of spawned servers."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

KEY_VARS = ("OPENROUTER_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "MISTRAL_API_KEY", "GROQ_API_KEY")


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


@pytest.fixture
def showcase(tmp_path: Path) -> Iterator[Path]:
    """A fresh showcase project (package lumen); its server, if any was started, is stopped after."""
    from aqven.project.init import init_project

    root = init_project(tmp_path / "lumen", "lumen")
    yield root
    stop_server(root)


@pytest.fixture
def tiny_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """The series tests' tiny project environment (see test_series_kit.tiny_environment)."""
    from test_series_kit import tiny_environment

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
