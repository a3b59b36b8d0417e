"""`aqven studio`: start the project server if none runs, then open (or print) a one-time Studio login link."""

from __future__ import annotations

import webbrowser
from pathlib import Path

from aqven.cli.render import console
from aqven.errors import PERSON_KEY_MISSING, PERSON_KEY_UNSAFE, AqvenError
from aqven.server.client import Client


def studio_link(client: Client, page: str | None = None, *, strict: bool = False) -> str:
    """A one-time link that logs a browser into Studio and lands on `page` (valid once, for five minutes), minted
    with the person key. Where no person key can be read (an agent's sandbox), the page's plain address, which
    a person opens after `aqven studio` (`strict`: raise instead)."""
    route = (page or "").strip().lstrip("#/")
    try:
        out = client.request("POST", "/api/studio/login-link", {"page": route}, as_person=True)
    except AqvenError as exc:
        if strict or exc.code not in (PERSON_KEY_MISSING, PERSON_KEY_UNSAFE):
            raise
        return f"http://localhost:{client.port}/studio/" + (f"#/{route}" if route else "") + " (after `aqven studio`)"
    return str(out["url"])


def open_studio(root: Path, *, page: str | None = None, open_browser: bool = True) -> str:
    """A Studio login link of this project's server (started when needed); opened in a browser unless told not to."""
    from aqven.cli.background import connect

    url = studio_link(connect(root), page, strict=True)
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
