"""A small JSON client of the project server, for the CLI and the MCP stdio bridge (the server starts when none
runs)."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path
from typing import Any

from aqven.errors import PERSON_KEY_MISSING, AqvenError, ServerError
from aqven.people import person_dir, person_key, refuse_unsafe
from aqven.server.lifecycle import read_token, start_server
from aqven.server.security import HOST

RECONNECTS = 2  # a read that finds the server gone starts it again (it resumes its series) and retries


class Client:
    """Every request carries the server's token (the agent's credential), read from `.aqven/server.json` once the
    server proved it knows it; a person's act carries the person key instead (`as_person`)."""

    def __init__(self, root: Path, *, start: bool = True) -> None:
        self.root = root
        self.start = start
        self.port = 0
        self.token = ""
        self.started_server = False  # this client started the server (it then runs on in the background)
        if start:
            self.connect()

    def connect(self) -> None:
        """Find this project's server (start one when none runs) and take its token."""
        self.port, started = start_server(self.root)
        self.started_server = self.started_server or started
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
        as_person: bool = False,
    ) -> Any:
        """One request with the agent token, or with the person key (`as_person`) for a person's act."""
        tail = path
        if query:
            tail += "?" + urllib.parse.urlencode({k: v for k, v in query.items() if v is not None})
        data = None if body is None else json.dumps(body).encode()
        for attempt in range(RECONNECTS + 1):
            credential = self.person_secret() if as_person else self.token
            sent = {"content-type": "application/json", "authorization": f"Bearer {credential}", **(headers or {})}
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

    def person_secret(self) -> str:
        """The person key of this user (made on first use), from the folder outside the project."""
        refuse_unsafe(self.root)
        key = person_key(create=True, root=self.root)
        if key is None:
            raise AqvenError(
                f"no person key can be read or made in {person_dir()}",
                code=PERSON_KEY_MISSING,
                hint="run this as the person at a terminal whose user can write ~/.config/aqven (XDG_CONFIG_HOME)",
            )
        return key.secret

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
