"""A fake Hugging Face Hub for tests: a real HTTP server on 127.0.0.1 serving dataset repositories, for
`huggingface_hub` pointed at it with ``HF_ENDPOINT``.

    with FakeHfHub({"acme/tickets": {"data/train.jsonl": b'{"q": "hi"}\\n'}}) as hub:
        monkeypatch.setenv("HF_ENDPOINT", hub.url)

It answers the two calls an import makes: the repository's file tree (``GET /api/datasets/<repo>/tree/<rev>``)
and a file (``HEAD`` / ``GET /datasets/<repo>/resolve/<rev>/<path>``), with the headers the client reads
(``X-Repo-Commit``, ``ETag``, ``Content-Length``); an unknown repository is 404 with ``X-Error-Code:
RepoNotFound``, as the hub answers.
"""

from __future__ import annotations

import hashlib
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import unquote, urlparse

COMMIT = "0123456789abcdef0123456789abcdef01234567"


class FakeHfHub:
    def __init__(self, repos: dict[str, dict[str, bytes]]) -> None:
        self.repos = repos
        self.paths: list[str] = []  # every path asked for, in order

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_port}"

    def __enter__(self) -> FakeHfHub:
        hub = self

        class Handler(_Handler):
            fake = hub

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class _Handler(BaseHTTPRequestHandler):
    fake: FakeHfHub
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def do_GET(self) -> None:
        self._answer(head=False)

    def _answer(self, *, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        self.fake.paths.append(path)
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] and "tree" in parts:
            at = parts.index("tree")
            files = self.fake.repos.get("/".join(parts[2:at]))
            if files is None:
                return self._missing(head)
            tree = [{"type": "file", "oid": _oid(b), "size": len(b), "path": p} for p, b in sorted(files.items())]
            return self._send(200, json.dumps(tree).encode(), "application/json", head)
        if parts[:1] == ["datasets"] and "resolve" in parts:
            at = parts.index("resolve")
            files = self.fake.repos.get("/".join(parts[1:at]))
            file = "/".join(parts[at + 2 :])
            if files is None or file not in files:
                return self._missing(head, "EntryNotFound" if files is not None else "RepoNotFound")
            body = files[file]
            return self._send(200, body, "application/octet-stream", head, {"ETag": f'"{_oid(body)}"'})
        return self._missing(head)

    def _missing(self, head: bool, code: str = "RepoNotFound") -> None:
        body = json.dumps({"error": "Repository not found"}).encode()
        self._send(404, body, "application/json", head, {"X-Error-Code": code})

    def _send(self, status: int, body: bytes, kind: str, head: bool, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        self.send_header("X-Repo-Commit", COMMIT)
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if not head:
            self.wfile.write(body)


def _oid(body: bytes) -> str:
    return hashlib.sha1(body).hexdigest()


__all__ = ["FakeHfHub"]
