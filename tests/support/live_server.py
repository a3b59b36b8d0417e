"""A real `aqven serve` process for a project, and its REST API as an attacker with the server token calls it."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from support.series_kit import wait_until


def _lower(headers: Any) -> dict[str, str]:
    return {str(k).lower(): str(v) for k, v in headers}


class LiveServer:
    """`python -m aqven serve --root ROOT` in its own session, answering with the token from its server.json."""

    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root = root
        self.env = env
        self.proc: subprocess.Popen[bytes] | None = None
        self.port = 0
        self.token = ""

    def __enter__(self) -> LiveServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start the server (again, after a kill) and wait until it answers with its new token."""
        info_file = self.root / ".aqven" / "server.json"
        info_file.parent.mkdir(parents=True, exist_ok=True)
        log = open(self.root / ".aqven" / "test-server.log", "ab")  # noqa: SIM115 - the process holds it
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "aqven", "serve", "--root", str(self.root)],
            env=self.env,
            cwd=self.root,
            stdout=log,
            stderr=log,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        log.close()
        proc = self.proc

        def up() -> bool:
            assert proc.poll() is None, (self.root / ".aqven" / "test-server.log").read_text()
            try:
                info = json.loads(info_file.read_text())
            except (OSError, ValueError):
                return False
            if info.get("pid") != proc.pid:
                return False
            self.port, self.token = int(info["port"]), str(info["token"])
            try:
                return self.get("/api/health").get("status") == "ok"
            except OSError:
                return False

        wait_until(up, timeout=60, step=0.05)

    def kill(self) -> None:
        """SIGKILL: the server dies mid-whatever, as a crash would leave it."""
        assert self.proc is not None
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)

    def call(self, method: str, path: str, body: Any = None) -> tuple[int, dict[str, str], Any]:
        """(HTTP status, headers (names in lower case), JSON body) of one request; an error status is returned."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}{path}",
            data=None if body is None else json.dumps(body).encode(),
            method=method,
            headers={"content-type": "application/json", "authorization": f"Bearer {self.token}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, _lower(response.headers.items()), json.loads(response.read())
        except urllib.error.HTTPError as err:
            return err.code, _lower(err.headers.items()), json.loads(err.read())

    def get(self, path: str) -> Any:
        status, _headers, data = self.call("GET", path)
        assert status == 200, (path, status, data)
        return data

    def post(self, path: str, body: Any) -> Any:
        status, _headers, data = self.call("POST", path, body)
        assert status < 300, (path, status, data)
        return data
