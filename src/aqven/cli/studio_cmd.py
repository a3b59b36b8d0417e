"""`aqven studio`: start the project server if none runs, then open (or print) a one-time Studio login link."""

from __future__ import annotations

import webbrowser
from pathlib import Path

from aqven.cli.render import console
from aqven.server.client import Client


def studio_link(client: Client, page: str | None = None) -> str:
    """A one-time link that logs a browser into Studio and lands on `page` (valid once, for five minutes)."""
    route = (page or "").strip().lstrip("#/")
    out = client.post("/api/studio/login-link", {"page": route})
    return str(out["url"])


def open_studio(root: Path, *, page: str | None = None, open_browser: bool = True) -> str:
    """A Studio login link of this project's server (started when needed); opened in a browser unless told not to."""
    url = studio_link(Client(root), page)
    console.print(f"Studio: {url}", markup=False, soft_wrap=True)
    console.print("(the link logs one browser in, once, within five minutes)", markup=False)
    if open_browser:
        try:
            opened = webbrowser.open(url)
        except webbrowser.Error:
            opened = False
        if not opened:
            console.print("(no browser found here: open the address above)", markup=False)
    return url
