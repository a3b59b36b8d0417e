"""A small JSON client of the project server, for the CLI and the MCP stdio bridge (the server starts when none
runs)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from aqven.errors import AqvenError, ServerError
from aqven.server.lifecycle import ensure_server, read_token
from aqven.server.security import HOST

RECONNECTS = 2  # a read that finds the server gone starts it again (it resumes its series) and retries


class Client:
    """Every request carries the server's token, read from `.aqven/server.json` once the server proved it knows it."""

    def __init__(self, root: Path, *, start: bool = True) -> None:
        self.root = root
        self.start = start
        self.port = 0
        self.token = ""
        if start:
            self.connect()

    def connect(self) -> None:
        """Find this project's server (start one when none runs) and take its token."""
        self.port = ensure_server(self.root)
        self.token = read_token(self.root)

    @property
    def base(self) -> str:
        return f"http://{HOST}:{self.port}"

    def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        query: dict[str, Any] | None = None,
        timeout: float = 600.0,
        headers: dict[str, str] | None = None,
    ) -> Any:
        tail = path
        if query:
            tail += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(RECONNECTS + 1):
            sent = {"content-type": "application/json", "authorization": f"Bearer {self.token}", **(headers or {})}
            req = urllib.request.Request(self.base + tail, data=data, method=method, headers=sent)
            try:
                with urllib.request.urlopen(req, timeout=timeout) as resp:
                    raw = resp.read()
                return json.loads(raw) if raw else None
            except urllib.error.HTTPError as exc:
                raise _error_from(exc) from None
            except (urllib.error.URLError, OSError) as exc:
                # The server died (a crash, a kill): a read is safe to repeat, so start the server again (it
                # resumes its series) and retry. A write is not repeated: whether it took effect is unknown.
                if method != "GET" or not self.start or attempt == RECONNECTS:
                    raise ServerError(
                        f"cannot reach the project server at {self.base}: {exc}",
                        hint="see .aqven/server.log; `aqven serve` runs it in the foreground",
                    ) from None
                self.connect()
        raise AssertionError("unreachable")

    def get(self, path: str, **query: Any) -> Any:
        return self.request("GET", path, query=query)

    def post(self, path: str, body: Any = None, **query: Any) -> Any:
        return self.request("POST", path, body if body is not None else {}, query=query)


def _error_from(exc: urllib.error.HTTPError) -> AqvenError:
    try:
        payload = json.loads(exc.read())
        err = payload.get("error") or {}
    except (ValueError, AttributeError):
        err = {}
    return AqvenError(
        err.get("message") or f"HTTP {exc.code}",
        code=err.get("code") or f"HTTP_{exc.code}",
        hint=err.get("hint", ""),
        file=err.get("file"),
        line=err.get("line"),
        details=err.get("details"),
        http_status=exc.code,
    )
